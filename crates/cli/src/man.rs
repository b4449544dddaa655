//! `glassbox man`: the man page, made from the argument definitions that `--help` prints
//! (`docs/glassbox.1` is its output, kept equal by a test): the command's page, then a
//! section per subcommand with its synopsis, description and options.

use clap::CommandFactory;
use std::io::Write;

/// The man page of `glassbox`, as roff.
pub(crate) fn page() -> std::io::Result<Vec<u8>> {
    let mut cmd = crate::Cli::command();
    cmd.build();
    let mut top = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut top)?;
    // The list of subcommands names a page of each (`glassbox-audit(1)`): here they are
    // sections of this page.
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(&top).lines() {
        match line
            .strip_prefix("glassbox\\-")
            .and_then(|l| l.strip_suffix("(1)"))
        {
            Some(sub) => writeln!(out, "glassbox {sub} (below)")?,
            None => writeln!(out, "{line}")?,
        }
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        // Built, a subcommand's binary name is `glassbox NAME`: what its synopsis shows.
        let name = sub
            .get_bin_name()
            .map(str::to_string)
            .unwrap_or_else(|| format!("glassbox {}", sub.get_name()));
        let man = clap_mangen::Man::new(sub.clone());
        let mut part = Vec::new();
        man.render_synopsis_section(&mut part)?;
        man.render_description_section(&mut part)?;
        man.render_options_section(&mut part)?;
        // The subcommand's own sections become subsections of one section named for it.
        writeln!(out, ".SH \"{}\"", name.to_uppercase())?;
        for line in String::from_utf8_lossy(&part).lines() {
            match line.strip_prefix(".SH ") {
                Some(title) => writeln!(out, ".SS {title}")?,
                None => writeln!(out, "{line}")?,
            }
        }
    }
    Ok(out)
}
