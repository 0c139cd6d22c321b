//! Stateful session codec (placeholder being written).
