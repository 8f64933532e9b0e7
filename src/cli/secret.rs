//! The store's URL (`SPICE_DATABASE_URL`, which may carry a password) kept out of
//! `/proc/PID/environ`, where any process of the same user can read it: Landlock
//! keeps a confined agent from another process's memory, not from its initial
//! environment.
//!
//! Theory: `/proc/PID/environ` shows the block of `NAME=value` strings the kernel
//! placed on the process's stack at `exec` (between `env_start` and `env_end` of
//! `/proc/self/stat`), whatever the process did with its environment since. So at
//! start, before any thread exists, the value's bytes in that block are overwritten
//! with NULs and the variable is set again, which puts the value on the heap: spice
//! still reads it, and a child spice starts still inherits it (and hides it in turn),
//! while the block that `/proc` shows holds none of it.

/// Hides `var`'s value from this process's `/proc/PID/environ`, keeping the variable.
/// Must run before any thread is started.
pub fn hide_from_proc(var: &str) {
    let Some(value) = std::env::var_os(var) else {
        return;
    };
    if let Some((start, end)) = environ_block() {
        let mut name = var.as_bytes().to_vec();
        name.push(b'=');
        // SAFETY: [start, end) is this process's initial environment block, mapped
        // and writable (it lies on the main thread's stack, which exec set up); no
        // other thread exists yet, and the only pointers into it are libc's
        // `environ` entries, which stay valid C strings (a NUL ends each sooner).
        unsafe {
            let block = std::slice::from_raw_parts_mut(start as *mut u8, end - start);
            scrub(block, &name);
        }
    }
    std::env::set_var(var, value);
}

/// Overwrites with NULs the value of each `name=value` entry of a NUL-separated
/// block.
fn scrub(block: &mut [u8], name: &[u8]) {
    let mut at = 0;
    while at < block.len() {
        let len = block[at..]
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(block.len() - at);
        if block[at..at + len].starts_with(name) {
            block[at + name.len()..at + len].fill(0);
        }
        at += len + 1;
    }
}

/// `env_start` and `env_end` of this process (fields 50 and 51 of
/// `/proc/self/stat`, counted after the parenthesised name).
fn environ_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    // Field 3 is the first after the name.
    let fields: Vec<&str> = after.split_whitespace().collect();
    let start: usize = fields.get(50 - 3)?.parse().ok()?;
    let end: usize = fields.get(51 - 3)?.parse().ok()?;
    (start > 0 && end > start).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_entry_s_value_is_overwritten() {
        let mut block =
            b"A=1\0SPICE_DATABASE_URL=postgres://u:pw@h/d\0SPICE_DATABASE_URLX=keep\0B=2\0"
                .to_vec();
        scrub(&mut block, b"SPICE_DATABASE_URL=");
        let text = String::from_utf8_lossy(&block);
        assert!(!text.contains("pw@"), "{text}");
        assert!(text.starts_with("A=1\0SPICE_DATABASE_URL=\0"), "{text:?}");
        assert!(text.contains("SPICE_DATABASE_URLX=keep\0B=2\0"), "{text:?}");
    }

    #[test]
    fn the_block_is_found_and_holds_this_process_s_environment() {
        let (start, end) = environ_block().unwrap();
        // SAFETY: reading this process's own initial environment block.
        let block = unsafe { std::slice::from_raw_parts(start as *const u8, end - start) };
        let proc = std::fs::read("/proc/self/environ").unwrap();
        assert_eq!(block, &proc[..]);
    }
}
