"""The run ledger: every launch, its plan, status, per-epoch metrics and events, in SQLite."""
