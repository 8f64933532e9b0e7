//! The bed library from a shell, for `benches/bed.sh`: seed a worktree, or measure
//! what trees really cost. Prints one JSON document on stdout.
//!
//! ```text
//! bed_bench seed TEMPLATE DEST PATH... [--link PATH]...
//! bed_bench usage TREE [--given OTHER]...
//! ```

use spice::bed::{self, SeedPath, SeedRequest};
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bed_bench: {e}");
            ExitCode::from(2)
        }
    }
}

/// Splits `args` into positional ones and the values of `--flag VALUE` pairs.
fn split(args: Vec<String>, flag: &str) -> Result<(Vec<String>, Vec<String>), String> {
    let (mut pos, mut flagged) = (Vec::new(), Vec::new());
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if a == flag {
            flagged.push(it.next().ok_or(format!("{flag} needs a value"))?);
        } else if a.starts_with("--") {
            return Err(format!("unknown option {a}"));
        } else {
            pos.push(a);
        }
    }
    Ok((pos, flagged))
}

fn run(mut args: Vec<String>) -> Result<String, String> {
    if args.is_empty() {
        return Err("usage: bed_bench seed TEMPLATE DEST PATH... [--link PATH]... | usage TREE [--given OTHER]...".into());
    }
    let cmd = args.remove(0);
    let json = match cmd.as_str() {
        "seed" => {
            let (pos, links) = split(args, "--link")?;
            let [template, dest, paths @ ..] = pos.as_slice() else {
                return Err("seed needs TEMPLATE and DEST".into());
            };
            let mut paths: Vec<SeedPath> = paths.iter().map(SeedPath::copy).collect();
            paths.extend(links.iter().map(SeedPath::link));
            let req = SeedRequest {
                template: PathBuf::from(template),
                dest: PathBuf::from(dest),
                paths,
            };
            let mut last = 0;
            let report = bed::seed_with_progress(&req, &mut |p| {
                if p.done || p.files >= last + 4096 {
                    last = p.files;
                    eprintln!(
                        "seeding {}: {} files, {} bytes",
                        p.path.display(),
                        p.files,
                        p.bytes
                    );
                }
            })
            .map_err(|e| e.to_string())?;
            serde_json::to_string(&report)
        }
        "usage" => {
            let (pos, given) = split(args, "--given")?;
            let [tree] = pos.as_slice() else {
                return Err("usage needs exactly one TREE".into());
            };
            let usage = bed::added(tree.as_ref(), &given).map_err(|e| e.to_string())?;
            serde_json::to_string(&usage)
        }
        other => return Err(format!("unknown command {other:?} (seed, usage)")),
    };
    json.map_err(|e| e.to_string())
}
