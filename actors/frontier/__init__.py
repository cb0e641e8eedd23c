"""The frontier: the sieve (URLs seen), the workbench (politeness), the distributor and virtualizer
between them, and the router that sends each link to its owner's sieve."""
