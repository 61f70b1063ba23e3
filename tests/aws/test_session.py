"""finetune.aws.session: sessions of one process share botocore's parsed service models, and
nothing else -- profile, region and credentials stay each session's own."""

from __future__ import annotations

import pytest

pytest.importorskip("boto3")

from finetune.aws import session
from finetune.errors import FinetuneError


@pytest.fixture
def two_profiles(tmp_path, monkeypatch):
    config = tmp_path / "config"
    config.write_text("[profile a]\nregion = eu-west-1\n\n[profile b]\nregion = us-west-2\n")
    creds = tmp_path / "credentials"
    creds.write_text(
        "[a]\naws_access_key_id = AKIAAAAA\naws_secret_access_key = sa\n\n"
        "[b]\naws_access_key_id = AKIABBBB\naws_secret_access_key = sb\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)


def test_sessions_share_the_models_and_keep_their_own_profile_region_and_keys(two_profiles):
    a, b = session.connect(profile="a"), session.connect(profile="b")
    loaders = {id(s.session._session.get_component("data_loader")) for s in (a, b)}
    assert len(loaders) == 1  # parsed once per process
    paths = a.session._session.get_component("data_loader").search_paths
    assert len(paths) == len(set(paths))  # boto3 appends its folder per session: kept once
    assert (a.region, b.region) == ("eu-west-1", "us-west-2")
    keys = [s.session.get_credentials().access_key for s in (a, b)]
    assert keys == ["AKIAAAAA", "AKIABBBB"]
    # a client of each: the same model, each session's own region
    assert a.client("s3").meta.region_name == "eu-west-1"
    assert b.client("s3").meta.region_name == "us-west-2"


def test_an_unknown_profile_still_fails_when_the_session_opens(two_profiles):
    with pytest.raises(FinetuneError, match=r"(?s)profile.*nope.*To fix"):
        session.connect(profile="nope")
