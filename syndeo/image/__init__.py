"""The Apptainer image: :mod:`.manifest` (what launchers check) apart from its build
(:mod:`.inputs`, :mod:`.steps`, :mod:`.build`)."""
