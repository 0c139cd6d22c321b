//! Demo h2c backend.
