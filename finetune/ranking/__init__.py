"""`finetune plan`: every way to run a recipe on the cloud, estimated, ranked and chosen.

- ``candidates``: every instance type x hosts x region x market x priced backend that can run
  the recipe's engine (catalog.engines' table, each backend's declared capabilities), each
  estimated by the one estimator (plan.estimate.estimate_for -> estimate.estimator);
- ``pareto``: the time-vs-euros front;
- ``rank``: ranked by euros, the cheapest meeting a deadline and the fastest within a budget
  picked, with the exact `finetune launch` command (also behind `launch --instance cheapest`).
"""
