"""The agents and the cluster: the driver, membership and leases, an agent's loop and its crew of
actors, termination, the operator's inbox and periodic passes."""
