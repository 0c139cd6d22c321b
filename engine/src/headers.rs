//! Header handling shared by the proxy: hop-by-hop stripping, x-forwarded-for.
