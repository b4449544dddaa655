//! Path values that name files the workspace holds: a tool that reads a spreadsheet is given
//! the spreadsheet, a git tool the repository, a tool that lists a folder the folder. A made-up
//! path (`glassbox-probe-<marker>.txt`) makes every such call fail with "no such file"; it
//! stays the value where the tool or the parameter says it makes something new (`write_file`,
//! `destination`), so that what is written carries the marker and can be followed.
//!
//! The files are [`super::plan::Probes::files`] (the sample workspace's, or a listing of the
//! folder the server's arguments name); the kind wanted is read from the parameter's name and
//! description and the tool's name, by the words that name a kind or its extension.

use super::words;
use serde_json::{Map, Value};

/// What a path parameter wants.
#[derive(Debug, PartialEq, Eq)]
enum Want {
    /// A new file or folder: the made-up path (a folder's where the words say one).
    New { dir: bool },
    /// A folder (the workspace itself, a git repository's root).
    Dir,
    /// A file with one of these extensions, the first that the workspace has.
    File(&'static [&'static str]),
}

/// Kinds by the words that name them, and their extensions (in order of preference).
const KINDS: &[(&[&str], &[&str])] = &[
    (
        &[
            "xlsx",
            "xls",
            "spreadsheet",
            "spreadsheets",
            "excel",
            "workbook",
            "sheet",
            "sheets",
        ],
        &["xlsx"],
    ),
    (
        &["docx", "doc", "word", "document", "documents"],
        &["docx", "pdf"],
    ),
    (&["pdf", "pdfs"], &["pdf"]),
    (&["csv", "tsv"], &["csv"]),
    (&["json"], &["json"]),
    (&["markdown", "md"], &["md"]),
    (
        &[
            "image",
            "images",
            "png",
            "jpg",
            "jpeg",
            "picture",
            "photo",
            "screenshot",
            "icon",
            "logo",
        ],
        &["png", "jpg", "jpeg"],
    ),
    (&["python", "py", "script"], &["py"]),
    (&["text", "txt", "note", "notes"], &["txt", "md"]),
];

/// What a file with no kind named is: text a reader shows.
const ANY_FILE: &[&str] = &["md", "txt", "csv", "json", "py"];

/// Words that say the value is something to be made.
const NEW: &[&str] = &[
    "write",
    "create",
    "save",
    "new",
    "make",
    "mkdir",
    "upload",
    "put",
    "export",
    "output",
    "out",
    "dest",
    "destination",
    "target",
    "to",
    "rename",
    "generate",
    "append",
    "init",
];

/// Words of a tool or parameter that want a folder.
const DIR: &[&str] = &[
    "dir",
    "dirs",
    "directory",
    "directories",
    "folder",
    "folders",
    "tree",
    "list",
    "ls",
    "repo",
    "repository",
    "git",
    "cwd",
    "root",
    "workspace",
    "project",
    "search",
    "find",
];

/// Words of a parameter that name the place a tool works in: it exists.
const PLACE: &[&str] = &["repo", "repository", "cwd", "root", "workspace", "project"];

/// What the parameter at `param` (its schema `obj`) of `tool` wants, for a path of `dir_hint`
/// (the name said a folder).
fn want(tool: &str, param: &str, obj: &Map<String, Value>, dir_hint: bool) -> Want {
    let param_words = words(param);
    let tool_words = words(tool);
    let description = obj
        .get("description")
        .and_then(Value::as_str)
        .map(|d| words(&d.chars().take(300).collect::<String>()))
        .unwrap_or_default();
    let says = |ws: &[String], list: &[&str]| ws.iter().any(|w| list.contains(&w.as_str()));
    // A parameter named for what is made (`destination`, `output_path`), else a tool named
    // for making (`write_file`, `create_directory`) whose parameter is not a source.
    let source = says(&param_words, &["source", "src", "from", "input", "in"]);
    // A repository or project the tool works in exists, whatever the tool makes in it.
    let place = says(&param_words, PLACE);
    // A description says what is written where it says so in words a reader of it would
    // not take otherwise ("file to save the log to").
    let described_new = says(
        &description,
        &["save", "write", "output", "export", "create"],
    );
    if says(&param_words, NEW) || (!source && !place && (says(&tool_words, NEW) || described_new)) {
        let dir = dir_hint
            || says(&param_words, DIR)
            || (says(&tool_words, DIR) && !says(&tool_words, &["file", "files"]));
        return Want::New { dir };
    }
    for (names, exts) in KINDS {
        if says(&param_words, names) || says(&description, names) {
            return Want::File(exts);
        }
    }
    // The tool's words say a folder only for a parameter that does not say files
    // (`git_add`'s `files` are files of the repository).
    let file_words = says(&param_words, &["file", "files", "filename", "filenames"]);
    if dir_hint || place || says(&param_words, DIR) || (!file_words && says(&tool_words, DIR)) {
        return Want::Dir;
    }
    for (names, exts) in KINDS {
        if says(&tool_words, names) {
            return Want::File(exts);
        }
    }
    Want::File(ANY_FILE)
}

/// What a path parameter is given.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Pick {
    /// This file or folder of the workspace.
    Existing(String),
    /// A made-up folder: the value is to be made, and is a folder.
    NewDir,
    /// The made-up path of the parameter's hint: the value is to be made, or the workspace
    /// has nothing of the kind wanted.
    MadeUp,
}

/// What the parameter `param` of `tool` (its schema `obj`) names in `workspace`: a file of
/// the kind it wants, the `variant`-th (distinct items of an array), or a folder, or a new
/// path.
pub(super) fn pick(
    workspace: &str,
    files: &[String],
    tool: &str,
    param: &str,
    obj: &Map<String, Value>,
    dir_hint: bool,
    variant: usize,
) -> Pick {
    if workspace.is_empty() {
        return Pick::MadeUp;
    }
    let root = workspace.trim_end_matches('/');
    let exts = match want(tool, param, obj, dir_hint) {
        Want::New { dir: true } => return Pick::NewDir,
        Want::New { dir: false } => return Pick::MadeUp,
        Want::Dir => {
            // The workspace first, then its folders.
            let mut dirs: Vec<&str> = files
                .iter()
                .filter_map(|f| f.rsplit_once('/').map(|(d, _)| d))
                .collect();
            dirs.dedup();
            return match variant {
                0 => Pick::Existing(root.to_string()),
                n => dirs
                    .get(n - 1)
                    .map_or(Pick::MadeUp, |d| Pick::Existing(format!("{root}/{d}"))),
            };
        }
        Want::File(exts) => exts,
    };
    let ext = |f: &String| f.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    let mut of_kind: Vec<&String> = Vec::new();
    for e in exts {
        of_kind.extend(files.iter().filter(|f| ext(f).as_deref() == Some(e)));
    }
    of_kind.get(variant).map_or(Pick::MadeUp, |f| {
        Pick::Existing(format!("{root}/{}", f.trim_start_matches('/')))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn files() -> Vec<String> {
        [
            "README.md",
            "assets/logo.png",
            "data/config.json",
            "data/sales.csv",
            "docs/notes.md",
            "reports/budget.xlsx",
            "reports/paper.pdf",
            "reports/summary.docx",
            "src/report.py",
            "todo.txt",
        ]
        .map(String::from)
        .to_vec()
    }

    fn pick(tool: &str, param: &str, schema: Value, dir: bool, variant: usize) -> Option<String> {
        let obj = schema.as_object().cloned().unwrap_or_default();
        match super::pick("/w", &files(), tool, param, &obj, dir, variant) {
            Pick::Existing(p) => Some(p),
            Pick::NewDir => Some("new folder".into()),
            Pick::MadeUp => None,
        }
    }

    #[test]
    fn a_path_names_the_file_of_the_kind_its_words_say() {
        let none = json!({});
        assert_eq!(
            pick(
                "read_excel",
                "file_path",
                json!({"description": "Path to the Excel workbook"}),
                false,
                0
            )
            .as_deref(),
            Some("/w/reports/budget.xlsx")
        );
        assert_eq!(
            pick("read_pdf", "path", none.clone(), false, 0).as_deref(),
            Some("/w/reports/paper.pdf")
        );
        assert_eq!(
            pick(
                "analyze",
                "path",
                json!({"description": "The CSV file to load"}),
                false,
                0
            )
            .as_deref(),
            Some("/w/data/sales.csv")
        );
        assert_eq!(
            pick("describe_image", "image_path", none.clone(), false, 0).as_deref(),
            Some("/w/assets/logo.png")
        );
        assert_eq!(
            pick("read_docx", "path", none.clone(), false, 0).as_deref(),
            Some("/w/reports/summary.docx")
        );
        // No kind named: text, and the next one for the next item of an array.
        assert_eq!(
            pick("read_file", "path", none.clone(), false, 0).as_deref(),
            Some("/w/README.md")
        );
        assert_eq!(
            pick("read_multiple_files", "paths", none.clone(), false, 1).as_deref(),
            Some("/w/docs/notes.md")
        );
    }

    #[test]
    fn a_folder_is_the_workspace_and_a_repository_is_its_root() {
        let none = json!({});
        assert_eq!(
            pick("git_status", "repo_path", none.clone(), false, 0).as_deref(),
            Some("/w")
        );
        assert_eq!(
            pick("list_directory", "path", none.clone(), false, 0).as_deref(),
            Some("/w")
        );
        assert_eq!(
            pick("search_files", "path", none.clone(), false, 0).as_deref(),
            Some("/w")
        );
        assert_eq!(
            pick("anything", "folder", none.clone(), true, 0).as_deref(),
            Some("/w")
        );
        assert_eq!(
            pick("anything", "folder", none, true, 1).as_deref(),
            Some("/w/assets")
        );
    }

    #[test]
    fn what_is_to_be_made_keeps_the_made_up_path() {
        let none = json!({});
        assert_eq!(pick("write_file", "path", none.clone(), false, 0), None);
        assert_eq!(
            pick("create_directory", "path", none.clone(), false, 0).as_deref(),
            Some("new folder")
        );
        assert_eq!(
            pick("move_file", "destination", none.clone(), false, 0),
            None
        );
        assert_eq!(
            pick("move_file", "source", none.clone(), false, 0).as_deref(),
            Some("/w/README.md")
        );
        // A source of a tool that makes something is read.
        assert_eq!(
            pick(
                "convert_to_pdf",
                "input_path",
                json!({"description": "The Word document"}),
                false,
                0
            )
            .as_deref(),
            Some("/w/reports/summary.docx")
        );
        assert_eq!(
            pick("export_csv", "output_path", none.clone(), false, 0),
            None
        );
        assert_eq!(
            pick(
                "browser_console_messages",
                "filename",
                json!({"description": "Filename to save the console messages to"}),
                false,
                0
            ),
            None
        );
        // The repository a tool makes a branch in exists; a file it adds is a file.
        assert_eq!(
            pick("git_create_branch", "repo_path", none.clone(), false, 0).as_deref(),
            Some("/w")
        );
        assert_eq!(
            pick("git_add", "files", none.clone(), false, 0).as_deref(),
            Some("/w/README.md")
        );
        // Without a workspace, or without a file of the kind: the made-up path.
        let obj = Map::new();
        assert_eq!(
            super::pick("", &files(), "read_file", "path", &obj, false, 0),
            Pick::MadeUp
        );
        assert_eq!(
            super::pick("/w", &[], "read_file", "path", &obj, false, 0),
            Pick::MadeUp
        );
    }
}
