//! glassbox-report
