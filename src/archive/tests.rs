use super::*;
use std::io::Write;

fn record(id: &str, n: u32, kind: &str, text: &str) -> String {
    let message = if kind == "user" {
        format!(r#"{{"role":"user","content":"{text}"}}"#)
    } else {
        format!(
            r#"{{"id":"m{n}","role":"assistant","model":"fake","content":[{{"type":"text","text":"{text}"}}],"stop_reason":"end_turn"}}"#
        )
    };
    format!(
        r#"{{"type":"{kind}","uuid":"{id}-{n}","sessionId":"{id}","cwd":"/w","timestamp":"2026-01-01T00:00:0{n}.000Z","message":{message}}}"#
    ) + "\n"
}

/// A state directory and a Claude transcript of session `id` with two records.
fn setup(id: &str) -> (tempfile::TempDir, PathBuf, Archive) {
    let d = tempfile::tempdir().unwrap();
    let projects = d.path().join("projects");
    std::fs::create_dir_all(&projects).unwrap();
    let t = projects.join(format!("{id}.jsonl"));
    let text = record(id, 1, "user", "say hello") + &record(id, 2, "assistant", "hello");
    std::fs::write(&t, text).unwrap();
    let a = Archive::at(&d.path().join("state"));
    (d, t, a)
}

#[test]
fn a_deleted_transcript_reads_the_same_from_its_archived_copy() {
    let (_d, t, a) = setup("0f1e2d3c-aaaa");
    let (agent, before, malformed) = crate::transcript::read_file(&t).unwrap();
    let s = a.store(&t, None, 7).unwrap();
    assert!(s.written && !s.replaced);
    assert_eq!(s.entry.meta.session_id, "0f1e2d3c-aaaa");
    assert_eq!(s.entry.meta.agent, "claude");
    assert_eq!(s.entry.meta.bytes_in, std::fs::metadata(&t).unwrap().len());
    assert!(s.entry.bytes_out > 0);
    std::fs::remove_file(&t).unwrap();
    let found = a.by_path(&t).expect("found by its original path");
    assert_eq!(found, a.by_session("0f1e").remove(0));
    let opened = open(&found).unwrap();
    let (agent2, after, malformed2) = crate::transcript::read_file(opened.path()).unwrap();
    assert_eq!((agent, malformed), (agent2, malformed2));
    assert_eq!(
        serde_json::to_value(&before).unwrap(),
        serde_json::to_value(&after).unwrap()
    );
    assert!(resolve(Some(a.dir().parent().unwrap()), &t).is_some());
    assert_eq!(found.meta.cwd.as_deref(), Some("/w"));
    assert_eq!(a.gone_for(Path::new("/w")), std::slice::from_ref(&found));
    assert!(a.gone_for(Path::new("/elsewhere")).is_empty());
}

#[test]
fn a_grown_transcript_replaces_its_copy_and_an_unchanged_one_is_not_rewritten() {
    let (_d, t, a) = setup("sess-grow");
    let first = a.store(&t, None, 1).unwrap();
    let again = a.store(&t, None, 2).unwrap();
    assert!(!again.written, "unchanged: not written again");
    let mut f = std::fs::OpenOptions::new().append(true).open(&t).unwrap();
    f.write_all(record("sess-grow", 3, "user", "more").as_bytes())
        .unwrap();
    drop(f);
    let grown = a.store(&t, None, 3).unwrap();
    assert!(grown.written && grown.replaced);
    assert!(grown.entry.meta.bytes_in > first.entry.meta.bytes_in);
    let all = a.list();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].meta.archived_at, 3);
    // No temporary file is left beside it.
    let names: Vec<_> = std::fs::read_dir(a.dir()).unwrap().flatten().collect();
    assert_eq!(names.len(), 1);
}

#[test]
fn pruning_removes_the_oldest_copies_first_until_the_bound_holds() {
    let d = tempfile::tempdir().unwrap();
    let a = Archive::at(&d.path().join("state"));
    let mut paths = Vec::new();
    for (i, id) in ["old", "mid", "new"].iter().enumerate() {
        let t = d.path().join(format!("{id}.jsonl"));
        std::fs::write(&t, record(id, 1, "user", "x")).unwrap();
        a.store(&t, None, i as i64 + 1).unwrap();
        paths.push(t);
    }
    let sizes: Vec<u64> = a.list().iter().map(|e| e.bytes_out).collect();
    let bound = sizes[1] + sizes[2];
    let would = a.prune(bound, true).unwrap();
    assert_eq!(would.len(), 1);
    assert_eq!(a.list().len(), 3, "a dry run removes nothing");
    let gone = a.prune(bound, false).unwrap();
    assert_eq!(gone[0].meta.session_id, "old");
    let left: Vec<String> = a.list().into_iter().map(|e| e.meta.session_id).collect();
    assert_eq!(left, ["mid", "new"]);
    assert!(a.prune(0, false).unwrap().len() == 2);
    assert!(a.list().is_empty());
}

#[test]
fn a_file_that_is_not_an_archive_is_skipped_and_kept() {
    let (_d, t, a) = setup("s1");
    a.store(&t, None, 1).unwrap();
    let stray = a.dir().join("x.0123456789abcdef.jsonl.zst");
    std::fs::write(&stray, b"not zstd").unwrap();
    assert_eq!(a.list().len(), 1);
    a.prune(0, false).unwrap();
    assert!(stray.exists(), "never deleted");
    let e = read_entry(&stray).unwrap_err().to_string();
    assert!(e.contains("not a spice archive"), "{e}");
}

/// Every real transcript (Claude and Codex, `$SPICE_TRANSCRIPTS`) survives the archive:
/// the same events and the same briefing from its copy once the original is gone.
#[test]
#[ignore = "needs the real transcripts under $SPICE_TRANSCRIPTS"]
fn every_real_transcript_round_trips_through_the_archive() {
    let root = std::env::var_os("SPICE_TRANSCRIPTS")
        .map(PathBuf::from)
        .expect("SPICE_TRANSCRIPTS must name the real transcripts (.ci/run sets it to ../shared/fixtures/transcripts)");
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                files.push(p);
            }
        }
    }
    assert!(
        files.len() >= 10,
        "too few transcripts under {}",
        root.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let a = Archive::at(&tmp.path().join("state"));
    let mut agents = std::collections::BTreeSet::new();
    for (i, f) in files.iter().enumerate() {
        let Ok((agent, events, malformed)) = crate::transcript::read_file(f) else {
            continue;
        };
        // A copy the test may delete: the originals are shared.
        let copy = tmp.path().join(format!("t{i}.jsonl"));
        std::fs::copy(f, &copy).unwrap();
        let shown = copy.display().to_string();
        let want = crate::transcript::briefing::brief(&shown, &events, malformed);
        let s = a.store(&copy, None, i as i64).unwrap();
        agents.insert(s.entry.meta.agent.clone());
        std::fs::remove_file(&copy).unwrap();
        let opened = open(&a.by_path(&copy).expect("archived")).unwrap();
        let (agent2, events2, malformed2) = crate::transcript::read_file(opened.path()).unwrap();
        assert_eq!((agent, malformed), (agent2, malformed2), "{}", f.display());
        let got = crate::transcript::briefing::brief(&shown, &events2, malformed2);
        assert_eq!(
            serde_json::to_value(&want).unwrap(),
            serde_json::to_value(&got).unwrap(),
            "{}",
            f.display()
        );
        assert!(
            s.entry.bytes_out < s.entry.meta.bytes_in || s.entry.meta.bytes_in < 4096,
            "{}: {} → {} bytes",
            f.display(),
            s.entry.meta.bytes_in,
            s.entry.bytes_out
        );
    }
    assert_eq!(agents.into_iter().collect::<Vec<_>>(), ["claude", "codex"]);
}

/// `entry`'s file rewritten as its header (with `bytes_in` as given) followed by a
/// compressed body of `zeros` zero bytes.
fn bomb(entry: &Entry, bytes_in: u64, zeros: usize) {
    use std::io::Read;
    let mut meta = entry.meta.clone();
    meta.bytes_in = bytes_in;
    let mut out = header_bytes(&meta).unwrap();
    let body = zstd::stream::encode_all(std::io::repeat(0).take(zeros as u64), 19).unwrap();
    out.extend_from_slice(&body);
    std::fs::write(&entry.path, out).unwrap();
}

#[test]
fn regression_an_archive_that_inflates_past_its_bound_is_refused_not_held() {
    // Before: a 33 KB archive inflating to 1 GiB was decompressed whole into memory.
    let (_d, t, a) = setup("bomb-1");
    let s = a.store(&t, None, 7).unwrap();
    let small = s.entry.meta.bytes_in;
    // The header kept: the body inflates past the size it recorded.
    bomb(&s.entry, small, 64 << 20);
    let e = a.by_path(&t).unwrap();
    let err = open(&e).err().expect("refused").to_string();
    assert!(
        err.contains("inflates beyond") && err.contains("damaged"),
        "{err}"
    );
    // The header forged too: the ratio bound holds.
    bomb(&s.entry, u64::MAX / 2, 64 << 20);
    let e = a.by_path(&t).unwrap();
    let err = open(&e).err().expect("refused").to_string();
    assert!(
        err.contains(&format!("beyond {}", read::RATIO_FLOOR)),
        "{err}"
    );
    assert_eq!(
        read::inflate_limit(10 << 30, 1 << 20),
        1000 << 20,
        "a large real archive may inflate to its recorded size within the ratio"
    );
}
