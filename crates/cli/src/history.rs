//! `glassbox history`: the audits of a target, oldest first, each with what changed since the
//! one before it.

use anyhow::Result;

/// `history`: the audits of a target, oldest first, each with what changed since the one
/// before it of the same version.
pub(crate) fn history(
    s: &glassbox_store::Store,
    target: &str,
    version: Option<&str>,
    json: bool,
) -> Result<i32> {
    let mut rows: Vec<glassbox_store::AuditRow> = match version {
        Some(v) => s.history(target, Some(v))?,
        None => s
            .audits()?
            .into_iter()
            .filter(|a| a.target == target)
            .collect(),
    };
    if rows.is_empty() {
        anyhow::bail!(
            "no audit of {} in the store{}",
            glassbox_model::printable(target),
            version
                .map(|v| format!(" at version {v}"))
                .unwrap_or_default()
        );
    }
    rows.sort_by_key(|a| a.id);
    let mut previous: std::collections::HashMap<Option<String>, &glassbox_store::AuditRow> =
        std::collections::HashMap::new();
    let mut out = String::new();
    for a in &rows {
        let mut changes = Vec::new();
        if let Some(p) = previous.get(&a.target_version) {
            if p.verdict != a.verdict {
                changes.push(format!(
                    "verdict {} -> {}",
                    wire(&p.verdict),
                    wire(&a.verdict)
                ));
            }
            for c in &a.checks {
                match p.checks.iter().find(|x| x.check_id == c.check_id) {
                    None => changes.push(format!("{} new (v{})", c.check_id, c.version)),
                    Some(x) if x.outcome != c.outcome => changes.push(format!(
                        "{} {} -> {}{}",
                        c.check_id,
                        wire(&x.outcome),
                        wire(&c.outcome),
                        if x.version != c.version {
                            format!(" (v{} -> v{})", x.version, c.version)
                        } else {
                            String::new()
                        }
                    )),
                    _ => {}
                }
            }
        }
        if let Some(p) = previous.get(&a.target_version) {
            changes.extend(glassbox_store::bundle_tool_changes(
                &p.evidence_dir,
                &a.evidence_dir,
            ));
        }
        previous.insert(a.target_version.clone(), a);
        if json {
            let line = serde_json::json!({
                "id": a.id,
                "run_id": a.run_id,
                "version": a.target_version,
                "started_at": a.started_at,
                "glassbox_version": a.glassbox_version,
                "verdict": a.verdict,
                "changes": changes,
            });
            out.push_str(&format!("{line}\n"));
        } else {
            out.push_str(&format!(
                "{:>5}  {}  {:<14} {:<12} {}\n",
                a.id,
                glassbox_model::printable(&a.started_at),
                glassbox_model::printable(a.target_version.as_deref().unwrap_or("-")),
                wire(&a.verdict),
                if changes.is_empty() {
                    String::new()
                } else {
                    glassbox_model::printable(&changes.join("; "))
                }
            ));
        }
    }
    if !json {
        outln!("{}", glassbox_model::printable(target));
        outln!(
            "{:>5}  {:<24}  {:<14} {:<12} changes since the previous audit of that version",
            "id",
            "recorded",
            "version",
            "verdict"
        );
    }
    out!("{out}");
    Ok(0)
}

/// A value's name on the wire (`clean`, `not-observed`...).
fn wire<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
