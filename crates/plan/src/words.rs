//! Words of a command line, split as a shell would split them (quotes and backslashes, no
//! expansion): a batch file's line, a launcher's one-string command. Written by hand: the
//! rules are these few, and a shell-words crate would bring expansion rules no caller wants.

/// Splits a line into words as a shell would, expanding nothing.
pub fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("a ' is not closed".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err("a \" is not closed".into()),
                        },
                        Some(c) => w.push(c),
                        None => return Err("a \" is not closed".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => word.get_or_insert_with(String::new).push(c),
                None => return Err("a line ends with \\".into()),
            },
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(
            split_words(r#"  a 'b c' "d \"e\" \\ \n" f\ g ''  "#).unwrap(),
            ["a", "b c", r#"d "e" \ \n"#, "f g", ""]
        );
        assert_eq!(split_words("x'y'\"z\"").unwrap(), ["xyz"]);
        for bad in ["'open", "\"open", "end\\", "\"x\\"] {
            assert!(split_words(bad).is_err(), "{bad}");
        }
    }
}
