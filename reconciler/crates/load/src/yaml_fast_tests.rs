//! The fast YAML path against the general parser (filled in by the
//! differential tests).
