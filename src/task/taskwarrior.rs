//! Conversion between Taskwarrior's `task export` JSON (2.6 and 3.x) and spice's task types.
//!
//! Parsing is all-or-nothing, failing on the first bad field with one line that names the
//! source, position, uuid and field. Uuids come out lowercased and dependencies stay uuids:
//! they may point at tasks already in the store, which only the caller can see. Unknown keys
//! (other people's UDAs) are tolerated. Export writes what Taskwarrior 2.6.2 imports, with
//! spice's own fields as the UDAs `phase` and `spice_body`, which Taskwarrior carries along.

use super::{check_name, Annotation, NewTask, Priority, Status, Task};
use crate::error::Error;
use crate::when;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// One task read from a Taskwarrior export, before ids are assigned.
#[derive(Debug, Clone)]
pub struct TwTask {
    pub new: NewTask,
    /// Lowercased uuids of the tasks this one depends on.
    pub depends: Vec<String>,
}

/// Parses the text of a `task export` (a JSON array of objects), or JSON Lines as
/// `task import` also accepts. `source` names the input in errors.
pub fn parse_export(text: &str, source: &str) -> Result<Vec<TwTask>, Error> {
    let syntax = |e: &serde_json::Error, line: usize| {
        // serde's Display appends its own position, which is wrong for JSON Lines.
        let msg = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let msg = msg.strip_suffix(&suffix).unwrap_or(&msg);
        let column = e.column();
        Error::input(format!(
            "{source}: invalid JSON at line {line} column {column}: {msg}"
        ))
    };
    let mut items = Vec::new();
    if text.trim_start().starts_with('[') {
        let all: Vec<Value> = serde_json::from_str(text).map_err(|e| syntax(&e, e.line()))?;
        for (i, v) in all.into_iter().enumerate() {
            items.push((format!("task {}", i + 1), v));
        }
    } else {
        let lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        for (i, line) in lines {
            let v = serde_json::from_str(line).map_err(|e| syntax(&e, i + 1))?;
            items.push((format!("line {}", i + 1), v));
        }
    }

    let mut seen: HashMap<String, String> = HashMap::new();
    let mut out = Vec::with_capacity(items.len());
    for (pos, value) in items {
        let fail = |uuid: Option<&str>, what: String| {
            let id = uuid.map(|u| format!(" (uuid {u})")).unwrap_or_default();
            Error::input(format!("{source}: {pos}{id}: {what}"))
        };
        let Value::Object(obj) = value else {
            let found = kind(&value);
            return Err(fail(None, format!("expected a JSON object, found {found}")));
        };
        let uuid = obj.get("uuid").ok_or_else(|| "missing".to_string());
        let uuid = uuid.and_then(|v| uuid_of(string(v)?));
        let uuid = uuid.map_err(|m| fail(None, field("uuid", m)))?;
        if let Some(first) = seen.get(&uuid) {
            let why = format!("duplicate uuid, also at {first}");
            return Err(fail(Some(&uuid), why));
        }
        let task = parse_fields(&obj, &uuid).map_err(|(f, m)| fail(Some(&uuid), field(f, m)))?;
        seen.insert(uuid, pos);
        out.push(task);
    }
    Ok(out)
}

fn field(name: &str, msg: String) -> String {
    format!("field '{name}': {msg}")
}

/// Reads everything but the uuid; errors carry the field name for the caller to format.
fn parse_fields(obj: &Map<String, Value>, uuid: &str) -> Result<TwTask, (&'static str, String)> {
    // Taskwarrior never writes null, but treating it as absent costs nothing.
    let get = |k: &str| obj.get(k).filter(|v| !v.is_null());
    let text = |k: &'static str| get(k).map(|v| string(v).map_err(|m| (k, m))).transpose();
    let named = |k: &'static str| {
        text(k)?
            .map(|s| check_name(k, s).map(|()| s.to_string()).map_err(|m| (k, m)))
            .transpose()
    };
    let date = |k: &'static str| {
        text(k)?
            .map(|s| when::parse_date(s).map_err(|m| (k, m)))
            .transpose()
    };

    let title = text("description")?.ok_or(("description", "missing".to_string()))?;
    if title.trim().is_empty() {
        return Err(("description", "must not be empty".into()));
    }
    let status = match text("status")? {
        // A recurring task is Taskwarrior's template for its generated instances. spice has
        // no recurrence, so the template comes in as one ordinary pending task rather than
        // failing the whole import or silently dropping work the user wrote down.
        Some("recurring") => Some(Status::Pending),
        Some(s) => Some(Status::parse(s).map_err(|m| ("status", m))?),
        None => None,
    };
    let priority = match text("priority")? {
        Some(p) => Priority::parse(p).map_err(|m| ("priority", m))?,
        None => None,
    };
    let depends = match get("depends") {
        // Older 2.x releases write one comma-separated string; 2.6.2 and 3.x write an array.
        Some(Value::String(s)) => s
            .split(',')
            .filter(|d| !d.trim().is_empty())
            .map(|d| uuid_of(d.trim()))
            .collect(),
        v => list(v, |_, v| string(v).and_then(uuid_of)),
    };
    let tags = list(get("tags"), |_, v| {
        string(v).and_then(|s| check_name("tag", s).map(|()| s.to_string()))
    });
    let annotations = list(get("annotations"), |i, v| {
        annotation(v).map_err(|m| format!("annotation {}: {m}", i + 1))
    });
    Ok(TwTask {
        new: NewTask {
            uuid: Some(uuid.to_string()),
            title: title.to_string(),
            body: text("spice_body")?.unwrap_or_default().to_string(),
            project: named("project")?,
            phase: named("phase")?,
            priority,
            due: date("due")?,
            wait: date("wait")?,
            tags: tags.map_err(|m| ("tags", m))?,
            status,
            entry: date("entry")?,
            end: date("end")?,
            annotations: annotations.map_err(|m| ("annotations", m))?,
        },
        depends: depends.map_err(|m| ("depends", m))?,
    })
}

fn annotation(v: &Value) -> Res<Annotation> {
    let Value::Object(o) = v else {
        return Err(format!("expected an object, found {}", kind(v)));
    };
    let part = |k: &str| match o.get(k) {
        Some(v) => string(v).map_err(|m| format!("{k}: {m}")),
        None => Err(format!("{k}: missing")),
    };
    Ok(Annotation {
        entry: when::parse_date(part("entry")?).map_err(|m| format!("entry: {m}"))?,
        description: part("description")?.to_string(),
    })
}

type Res<T> = Result<T, String>;

/// An absent list is empty; anything but an array is an error.
fn list<T>(v: Option<&Value>, f: impl Fn(usize, &Value) -> Res<T>) -> Res<Vec<T>> {
    match v {
        None => Ok(Vec::new()),
        Some(Value::Array(a)) => a.iter().enumerate().map(|(i, v)| f(i, v)).collect(),
        Some(v) => Err(format!("expected an array, found {}", kind(v))),
    }
}

fn string(v: &Value) -> Res<&str> {
    v.as_str()
        .ok_or_else(|| format!("expected a string, found {}", kind(v)))
}

/// Checks the 8-4-4-4-12 hex shape and lowercases, so uuids compare equal however they were typed.
fn uuid_of(s: &str) -> Res<String> {
    let ok = s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
    if ok {
        Ok(s.to_ascii_lowercase())
    } else {
        Err(format!(
            "invalid uuid '{s}': expected 32 hex digits as 8-4-4-4-12"
        ))
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Writes tasks as a Taskwarrior export array. `uuid_of` maps spice ids to uuids so
/// `depends` can name uuids; a dependency missing from it has no uuid to write and is left out.
pub fn export(tasks: &[Task], uuid_of: &HashMap<String, String>) -> Value {
    let tw = |m| Value::String(when::taskwarrior(m));
    let some = |v: Value, present: bool| present.then_some(v);
    let one = |t: &Task| {
        let deps: Vec<&String> = t.depends.iter().filter_map(|d| uuid_of.get(d)).collect();
        let note = |a: &Annotation| json!({"entry": tw(a.entry), "description": a.description});
        let notes: Vec<Value> = t.annotations.iter().map(note).collect();
        let body = some(t.body.clone().into(), !t.body.is_empty());
        let mut o = json!({
            "uuid": t.uuid, "description": t.title, "status": t.status.as_str(),
            "entry": tw(t.entry), "modified": tw(t.modified), "phase": t.phase,
        });
        let optional = [
            ("project", t.project.clone().map(Value::from)),
            ("priority", t.priority.map(|p| p.as_str().into())),
            ("due", t.due.map(tw)),
            ("wait", t.wait.map(tw)),
            ("end", t.end.map(tw)),
            ("tags", some(t.tags.clone().into(), !t.tags.is_empty())),
            // The array form: what 2.6.2 and 3.x export, and what both import.
            ("depends", some(json!(deps), !deps.is_empty())),
            ("annotations", some(notes.into(), !t.annotations.is_empty())),
            ("spice_body", body),
        ];
        for (k, v) in optional.into_iter().filter_map(|(k, v)| Some((k, v?))) {
            o[k] = v;
        }
        o
    };
    Value::Array(tasks.iter().map(one).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3f2a0c4e-1b2d-4e5f-8a9b-0c1d2e3f4a5b";
    const B: &str = "4f2a0c4e-1b2d-4e5f-8a9b-0c1d2e3f4a5b";
    const C: &str = "5f2a0c4e-1b2d-4e5f-8a9b-0c1d2e3f4a5b";

    /// Lets inputs be raw strings: `{A}` `{B}` `{C}` name uuids and `|` is a line break.
    fn fill(s: &str) -> String {
        let s = s.replace("{A}", A).replace("{B}", B);
        s.replace("{C}", C).replace('|', "\n")
    }

    fn err(text: &str) -> String {
        format!("{}", parse_export(&fill(text), "tasks.json").unwrap_err())
    }

    #[test]
    fn parses_26_and_3x_exports_and_json_lines_alike() {
        // 2.6: depends as one string, ids, urgency, foreign UDAs, a recurring template.
        let old = r#"[
{"id":1,"description":"base","entry":"20260101T120000Z","modified":"20260102T120000Z",
 "project":"SPICE","priority":"H","due":"20261101T120000Z","status":"pending","uuid":"{A}",
 "tags":["alpha","beta"],"annotations":[{"entry":"20260103T120000Z","description":"a note"}],
 "urgency":9.1,"estimate":"2h","start":"20260101T130000Z","scheduled":"20260101T130000Z"},
{"id":2,"description":"child","status":"waiting","wait":"20300101T000000Z","uuid":"{B}",
 "depends":"{A},{C}","phase":"review","spice_body":"why"},
{"id":0,"description":"t","status":"recurring","recur":"weekly","mask":"--","uuid":"{C}"}]"#;
        // 3.x writes depends as an array; `task import` also reads JSON Lines.
        let mut new: Vec<Value> = serde_json::from_str(&fill(old)).unwrap();
        new[1]["depends"] = json!([A, C]);
        let lines: Vec<String> = new.iter().map(Value::to_string).collect();
        let got = parse_export(&fill(old).replace(A, &A.to_uppercase()), "x").unwrap();
        let debug = |text: &str| format!("{:?}", parse_export(text, "x").unwrap());
        assert_eq!(format!("{got:?}"), debug(&Value::from(new).to_string()));
        assert_eq!(format!("{got:?}"), debug(&lines.join("\n\n")));
        // Field mapping is pinned by export_shape plus the round trip; here, only what differs.
        assert_eq!(got[0].new.uuid.as_deref(), Some(A));
        assert_eq!(got[0].new.due, Some(1_793_534_400_000_000));
        assert_eq!(got[1].depends, [A, C]);
        assert_eq!(got[1].new.status, Some(Status::Waiting));
        assert_eq!(got[2].new.status, Some(Status::Pending));
        // B is not in the input: resolving dependencies is the caller's job.
        let dangling = r#"[{"uuid":"{A}","description":"x","depends":["{B}"]}]"#;
        assert_eq!(parse_export(&fill(dangling), "x").unwrap()[0].depends, [B]);
        assert!(parse_export("[\n]\n", "x").unwrap().is_empty());
    }

    #[test]
    fn field_errors_name_source_position_uuid_and_field() {
        let cases = [
            r#""priority":"X" => priority: invalid priority 'X': expected H, M, L or none"#,
            r#""project":"my project" => project: invalid project 'my project'"#,
            r#""tags":["ok","bad tag"] => tags: invalid tag 'bad tag'"#,
            r#""tags":"a" => tags: expected an array, found a string"#,
            r#""due":"soonish" => due: invalid date 'soonish'"#,
            r#""entry":17 => entry: expected a string, found a number"#,
            r#""depends":"{B},nope" => depends: invalid uuid 'nope'"#,
            r#""depends":[1] => depends: expected a string, found a number"#,
            r#""depends":{} => depends: expected an array, found an object"#,
            r#""status":"lost" => status: invalid status 'lost'"#,
            r#""annotations":[{"description":"n"}] => annotations: annotation 1: entry: missing"#,
            r#""phase":"a,b" => phase: invalid phase 'a,b'"#,
            r#""spice_body":[] => spice_body: expected a string, found an array"#,
            r#""description":5 => description: expected a string, found a number"#,
            r#""description":" " => description: must not be empty"#,
        ];
        for case in cases {
            let (bad, rest) = case.split_once(" => ").unwrap();
            let (field, why) = rest.split_once(": ").unwrap();
            let text = format!(
                r#"[{{"uuid":"{B}","description":"ok"}},{{"uuid":"{A}","description":"d",{bad}}}]"#
            );
            let want = format!("tasks.json: task 2 (uuid {A}): field '{field}': {why}");
            assert!(err(&text).starts_with(&want), "{} lacks {want}", err(&text));
        }
    }

    #[test]
    fn structural_errors() {
        let cases = [
            r#"[{"uuid":"{A}","description":"a"},{"uuid":"{B}","description":"b"},{"uuid":"{A}","description":"c"}]
               => tasks.json: task 3 (uuid {A}): duplicate uuid, also at task 1"#,
            r#"{"uuid":"{A}","description":"a"}|{"uuid":"{B}","priority":"Z","description":"b"}
               => tasks.json: line 2 (uuid {B}): field 'priority': invalid priority 'Z': expected H, M, L or none"#,
            r#"[{"description":"d"}] => tasks.json: task 1: field 'uuid': missing"#,
            r#"[{"uuid":"abc"}] => tasks.json: task 1: field 'uuid': invalid uuid 'abc': expected 32 hex digits as 8-4-4-4-12"#,
            r#"[1] => tasks.json: task 1: expected a JSON object, found a number"#,
            r#""s" => tasks.json: line 1: expected a JSON object, found a string"#,
            r#"[|{"uuid": 1,|"description" 5}] => tasks.json: invalid JSON at line 3 column 15: expected `:`"#,
            r#"{}||{"a": => tasks.json: invalid JSON at line 3 column 5: EOF while parsing a value"#,
        ];
        for case in cases {
            let (text, want) = case.split_once(" => ").unwrap();
            assert_eq!(err(text.trim_end()), fill(want.trim()));
        }
    }

    fn sample() -> Vec<Task> {
        let base = Task {
            id: "s1".into(),
            uuid: A.into(),
            title: "base".into(),
            body: "the body".into(),
            project: Some("SPICE".into()),
            phase: "review".into(),
            priority: Some(Priority::M),
            due: Some(1_793_534_400_000_000), // 20261101T120000Z
            wait: None,
            tags: vec!["alpha".into()],
            status: Status::Completed,
            entry: 1_767_268_800_000_000, // 20260101T120000Z
            end: Some(1_769_904_000_000_000),
            modified: 1_769_990_400_000_000, // 20260202T000000Z
            depends: vec![],
            annotations: vec![Annotation {
                entry: 1_767_441_600_000_000,
                description: "n".into(),
            }],
        };
        let mut child = base.clone();
        (child.id, child.uuid, child.title) = ("s2".into(), B.into(), "child".into());
        (child.body, child.project, child.priority, child.due) = (String::new(), None, None, None);
        (child.wait, child.end) = (Some(1_893_456_000_000_000), None); // 20300101T000000Z
        (child.tags, child.annotations, child.phase) = (vec![], vec![], "todo".into());
        (child.status, child.depends) = (Status::Waiting, vec!["s1".into()]);
        vec![base, child]
    }

    fn ids() -> HashMap<String, String> {
        HashMap::from([("s1", A), ("s2", B)].map(|(i, u)| (i.to_string(), u.to_string())))
    }

    #[test]
    fn export_shape_and_round_trip() {
        let v = export(&sample(), &ids());
        let want = json!([
            {"uuid": A, "description": "base", "status": "completed", "phase": "review",
             "entry": "20260101T120000Z", "modified": "20260202T000000Z", "due": "20261101T120000Z",
             "end": "20260201T000000Z", "project": "SPICE", "priority": "M", "tags": ["alpha"],
             "annotations": [{"entry": "20260103T120000Z", "description": "n"}],
             "spice_body": "the body"},
            {"uuid": B, "description": "child", "status": "waiting", "phase": "todo", "depends": [A],
             "entry": "20260101T120000Z", "modified": "20260202T000000Z", "wait": "20300101T000000Z"},
        ]);
        assert_eq!(v, want);
        // A dependency with no known uuid is left out rather than written as a non-uuid.
        let unmapped = export(&sample(), &HashMap::new());
        assert!(unmapped[1].get("depends").is_none());

        // Parsing the export gives back every field spice keeps, bar id and modified.
        let (tasks, text) = (sample(), v.to_string());
        let by_uuid: HashMap<_, _> = ids().into_iter().map(|(i, u)| (u, i)).collect();
        for (t, p) in tasks.iter().zip(parse_export(&text, "rt").unwrap()) {
            let n = p.new;
            let back = Task {
                id: t.id.clone(),
                uuid: n.uuid.unwrap(),
                title: n.title,
                body: n.body,
                project: n.project,
                phase: n.phase.unwrap(),
                priority: n.priority,
                due: n.due,
                wait: n.wait,
                tags: n.tags,
                status: n.status.unwrap(),
                entry: n.entry.unwrap(),
                end: n.end,
                modified: t.modified,
                depends: p.depends.iter().map(|u| by_uuid[u].clone()).collect(),
                annotations: n.annotations,
            };
            assert_eq!(&back, t);
        }
    }
}
