"""The experiment layer every estimator shares: named seed spaces (:mod:`.seeds`), arms of
seeded rollouts (:mod:`.rollouts`)."""
