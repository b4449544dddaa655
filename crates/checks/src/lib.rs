//! glassbox-checks
