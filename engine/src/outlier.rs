//! Outlier detection (placeholder being written).
