//! Load-balancing policies over a cluster's routable hosts.
