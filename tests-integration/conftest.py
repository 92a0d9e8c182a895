"""downstream_example/ is a package of its own, installed from the built wheels
into an environment of its own and tested there (tools/downstream_example.py):
the workspace's pytest leaves it out."""

collect_ignore = ["downstream_example"]
