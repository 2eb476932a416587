"""The contract both sides share: node settings, groups, GPUs, the bring-up timeline,
owner-only files and the one error hierarchy.  Imports nothing else of the package."""
