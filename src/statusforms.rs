//! Status forms of the shipped marker tables: the words a tool writes a
//! status in (`status code 503`, `HTTP 404`, `"code": 429`), each written
//! once and classed by the one status table, the `http` markers. A line
//! `{"status-form": "status code #", "match": "word", "source": ...}` of
//! `markers/markers.jsonl` stands for one text marker per class of the
//! table: its `#` is shaped to that class's codes (a bare group of codes,
//! `(?:403|404)`, which `codeset.rs` reads as the codes the `#` may be) and
//! its entry carries that class's flags. So every form reads every status
//! the table knows, the same way the structured `http-status` is read, and
//! a status added to the table is read in every form at once.
//!
//! A form may carry `generic` (every entry it stands for is generic) and an
//! `unless`; the table's own flags (`status`, `generic`) pass to the entries
//! of their class. Only the shipped tables use forms, and a form reads the
//! `http` markers written on lines before it. The tables are expanded when
//! they are read (`markers::parse`, and `build.rs`, which includes this
//! file), so every later reader sees plain entries.
//!
//! Plain Rust, no I/O; it compiles both into the crate and into `build.rs`.

use serde_json::{Map, Value};

/// The key that marks a line as a status form.
pub const KEY: &str = "status-form";

/// The keys a form's line may hold.
const KEYS: [&str; 5] = [KEY, "match", "generic", "unless", "source"];

/// One `http` entry of the table: its status, class and flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: String,
    pub class: String,
    pub status: bool,
    pub generic: bool,
}

/// The entries a form's line stands for, one per class (and set of flags) of
/// `table`, in the order the table first names them; an error names the
/// rule the line breaks.
pub fn expand(form: &Map<String, Value>, table: &[Status]) -> Result<Vec<Map<String, Value>>, String> {
    if let Some(key) = form.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!("a status form has no field {key:?} (it takes {})", KEYS.join(", ")));
    }
    let text = |key: &str| form.get(key).and_then(Value::as_str);
    let marker = text(KEY).ok_or_else(|| format!("{KEY:?} is the form's text, a string"))?;
    if marker.matches('#').count() != 1 {
        return Err(format!("status form {marker:?} must hold one `#`, where the status stands"));
    }
    if form.get("match").is_none() || text("source").is_none() {
        return Err(format!("status form {marker:?} needs a `match` and a `source`"));
    }
    if table.is_empty() {
        return Err(format!("status form {marker:?} comes before any `http` marker: no status table to read"));
    }
    let generic = match form.get("generic") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(format!("`generic` of status form {marker:?} is true or false")),
    };
    let mut groups: Vec<(&Status, Vec<&str>)> = Vec::new();
    for s in table {
        let same =
            |(g, _): &&mut (&Status, Vec<&str>)| (&g.class, g.status, g.generic) == (&s.class, s.status, s.generic);
        match groups.iter_mut().find(same) {
            Some((_, codes)) => codes.push(&s.code),
            None => groups.push((s, vec![&s.code])),
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    for (group, codes) in groups {
        let mut e = Map::new();
        e.insert("class".into(), Value::String(group.class.clone()));
        e.insert("marker".into(), Value::String(marker.to_string()));
        e.insert("match".into(), form["match"].clone());
        e.insert("source".into(), form["source"].clone());
        e.insert("shape".into(), Value::String(shape(&codes)));
        if let Some(unless) = form.get("unless") {
            e.insert("unless".into(), unless.clone());
        }
        if generic || group.generic {
            e.insert("generic".into(), Value::Bool(true));
        }
        if group.status {
            e.insert("status".into(), Value::Bool(true));
        }
        out.push(e);
    }
    Ok(out)
}

/// The shape of a form's entry for `codes`: the group of codes alone, which
/// `codeset::CodeSet::parse` reads as the codes the marker's `#` may be,
/// bounded where the marker opens with a word character or ends at its `#`.
/// Every form shares it, so the component holds each class's shape once.
pub fn shape(codes: &[&str]) -> String {
    format!("(?:{})", codes.join("|"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: &str, class: &str, status: bool, generic: bool) -> Status {
        Status { code: code.into(), class: class.into(), status, generic }
    }

    fn table() -> Vec<Status> {
        vec![
            status("401", "environmental", false, false),
            status("429", "transient_transport", false, false),
            status("403", "environmental", true, false),
            status("503", "transient_transport", false, false),
            status("400", "work", true, true),
        ]
    }

    fn form(line: &str) -> Map<String, Value> {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn a_form_stands_for_one_entry_per_class_and_flags_of_the_table() {
        let out = expand(&form(r#"{"status-form": "got #", "match": "word", "source": "s"}"#), &table()).unwrap();
        let seen: Vec<(String, String, bool, bool)> = out
            .iter()
            .map(|e| {
                let flag = |k: &str| e.get(k) == Some(&Value::Bool(true));
                (
                    e["class"].as_str().unwrap().into(),
                    e["shape"].as_str().unwrap().into(),
                    flag("status"),
                    flag("generic"),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("environmental".into(), "(?:401)".into(), false, false),
                ("transient_transport".into(), "(?:429|503)".into(), false, false),
                ("environmental".into(), "(?:403)".into(), true, false),
                ("work".into(), "(?:400)".into(), true, true),
            ]
        );
        assert!(out.iter().all(|e| e["marker"] == "got #" && e["match"] == "word" && e["source"] == "s"));
    }

    #[test]
    fn a_generic_form_makes_every_entry_generic_and_keeps_its_unless() {
        let line =
            r##"{"status-form": "#, message='", "match": "word", "generic": true, "unless": "x", "source": "s"}"##;
        let out = expand(&form(line), &table()).unwrap();
        assert!(out.iter().all(|e| e["generic"] == true && e["unless"] == "x"));
        assert_eq!(out[1]["shape"], "(?:429|503)");
    }

    #[test]
    fn a_bad_form_is_refused_naming_its_rule() {
        let no_hash = expand(&form(r#"{"status-form": "status", "match": "word", "source": "s"}"#), &table());
        assert!(no_hash.unwrap_err().contains("one `#`"));
        let two = expand(&form(r##"{"status-form": "# of #", "match": "word", "source": "s"}"##), &table());
        assert!(two.unwrap_err().contains("one `#`"));
        let class =
            expand(&form(r#"{"status-form": "got #", "match": "word", "class": "work", "source": "s"}"#), &table());
        assert!(class.unwrap_err().contains("no field \"class\""));
        let early = expand(&form(r#"{"status-form": "got #", "match": "word", "source": "s"}"#), &[]);
        assert!(early.unwrap_err().contains("before any `http` marker"));
        let flag =
            expand(&form(r#"{"status-form": "got #", "match": "word", "generic": "yes", "source": "s"}"#), &table());
        assert!(flag.unwrap_err().contains("`generic`"));
        let unsourced = expand(&form(r#"{"status-form": "got #", "match": "word"}"#), &table());
        assert!(unsourced.unwrap_err().contains("a `match` and a `source`"));
    }
}
