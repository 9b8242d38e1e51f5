"""Certifiers: upper witnesses (:mod:`.upper`), lower certificates (:mod:`.lower`), the
reference constructions users compare with (:mod:`.reference`), the one interface every
method follows (:mod:`.interface`), the registry of softrank's own methods
(:mod:`.registry`) and the engine that runs them (:mod:`.bracket`)."""
