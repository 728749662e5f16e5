"""Which fix prevents it: candidates validated on fresh draws (:mod:`.fix`), the result
(:mod:`.result`), the pytest regression test a validated fix becomes (:mod:`.regression`)."""
