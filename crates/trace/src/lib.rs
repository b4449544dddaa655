//! glassbox-trace
