//! glassbox-sandbox
