"""Which step caused the failure: the commitment curve's plans (estimand, :mod:`.curve`),
their rollouts and the adaptive design (:mod:`.attribute`, :mod:`.bisection`), the verdict
and its refutation (:mod:`.refute`), Shapley credit (:mod:`.shapley`), the result
(:mod:`.result`)."""
