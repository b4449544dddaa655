//! glassbox-audit
