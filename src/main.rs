//! The `spice` binary: parse arguments, run, map errors to exit codes.

fn main() {
    std::process::exit(spice::cli::main());
}
