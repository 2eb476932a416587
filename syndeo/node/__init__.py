"""The node runtime: what ``syndeo node`` runs on every node of every target (bring-up,
Ray, the workload, leaving).  Imports only the shared contract and the rendezvous: never
the launcher, the CLI, the benchmark or the comparison."""
