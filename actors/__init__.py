"""actors: the parts of a crawling agent (BUbiNG's names), each a Ray actor or driven by one."""


def actor_repr(actor: object) -> str:
    """How the Ray dashboard and the worker logs name an actor: its class and its actor name,
    which says whose it is (``ParserActor(raycrawl-parser-rc:agent1)``)."""
    import ray

    try:
        name = ray.get_runtime_context().get_actor_name() or ""
    except Exception:  # noqa: BLE001 - outside an actor, a repr must still work
        name = ""
    return f"{type(actor).__name__}({name})"


def named(cls: type) -> type:
    """An actor class as the Ray dashboard should show it (apply under ``@ray.remote``): its own
    name, not ``actor_class.<locals>.X`` (the factories define it inside a function), and
    :func:`actor_repr`."""
    cls.__qualname__ = cls.__name__
    cls.__repr__ = actor_repr
    return cls
