"""Which text made a decision: the context's pieces (:mod:`.pieces`), what counts as "the
same decision" (:mod:`.decisions`), the removal tests and their search (:mod:`.why`), the
result (:mod:`.result`)."""
