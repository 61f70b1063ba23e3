"""Values with a unit, as the command line and the options models read them: durations
(90s, 45m, 2h) and euro caps (--max-eur), one parser and one set of rules for every flag."""
