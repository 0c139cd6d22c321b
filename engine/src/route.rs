//! Route matching: virtual host by `:authority`, then first matching route.
