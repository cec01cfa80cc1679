"""Multi-broker failure tests: real ZooKeeper, broker processes, stock clients (issue 5)."""
