"""An experiment as the researcher wrote it: the spec and its optional tables, the manifest, loading, timelines, the adaptive draw."""
