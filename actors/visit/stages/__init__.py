"""The built-in crawl-time stages, one module each (a :class:`~actors.visit.visit_stage.VisitStage`
named ``STAGE``); actors/visit/chain.py puts them in order."""
