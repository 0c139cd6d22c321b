//! Config errors: every one names the offending field as a path from the root.

use std::fmt;

/// Where in a config document something is, e.g.
/// `static_resources.clusters[0].lb_policy`. Proto field names are used
/// (never JSON camelCase) so paths match `docs/configuration.md`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Path(String);

impl Path {
    /// The document root (displayed as `<root>` when nothing is appended).
    pub fn root() -> Self {
        Self::default()
    }

    /// `self.name`.
    pub fn field(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Self(name.to_owned())
        } else {
            Self(format!("{}.{name}", self.0))
        }
    }

    /// `self[i]` (a repeated field element).
    pub fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }

    /// `self["key"]` (a proto map entry).
    pub fn key(&self, key: &str) -> Self {
        Self(format!("{}[{key:?}]", self.0))
    }

    /// `self[name]`: an xDS resource by name, as in
    /// `clusters[echo].connect_timeout`.
    pub fn named(&self, name: &str) -> Self {
        Self(format!("{}[{name}]", self.0))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("<root>")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// Why a config was rejected. `Display` is `PATH: message`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", file.display())]
    Io {
        file: std::path::PathBuf,
        source: std::io::Error,
    },
    /// The text is not valid YAML/JSON (message carries line and column).
    #[error("{0}")]
    Syntax(String),
    /// An error inside a file other than the bootstrap (a file source).
    #[error("{}: {source}", file.display())]
    InFile {
        file: std::path::PathBuf,
        source: Box<Error>,
    },
    /// A field that is not in Envoy's proto (or not in our subset of it).
    #[error("{path}: unknown field")]
    UnknownField { path: Path },
    /// A valid Envoy field or value that this gateway does not implement.
    #[error("{path}: {message}")]
    Unsupported { path: Path, message: String },
    /// A value that is wrong by Envoy's own rules (or ours, where stricter).
    #[error("{path}: {message}")]
    Invalid { path: Path, message: String },
}

impl Error {
    pub fn invalid(path: Path, message: impl Into<String>) -> Self {
        Self::Invalid {
            path,
            message: message.into(),
        }
    }

    /// `PATH: not supported`.
    pub fn unsupported(path: Path) -> Self {
        Self::unsupported_msg(path, "not supported")
    }

    /// `PATH: WHAT is not supported`, e.g. `CLUSTER_PROVIDED is not supported`.
    pub fn unsupported_value(path: Path, what: impl fmt::Display) -> Self {
        Self::unsupported_msg(path, format!("{what} is not supported"))
    }

    pub fn unsupported_msg(path: Path, message: impl Into<String>) -> Self {
        Self::Unsupported {
            path,
            message: message.into(),
        }
    }

    /// The field path, where the error has one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::UnknownField { path }
            | Self::Unsupported { path, .. }
            | Self::Invalid { path, .. } => Some(path),
            Self::InFile { source, .. } => source.path(),
            Self::Io { .. } | Self::Syntax(_) => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
