//! A standalone supervisor of one local-executor replica, the same as
//! `gitfleet __supervise`: `gitfleet-supervise --claim FILE --exit-file FILE
//! -- PROGRAM [ARG]...`. The library's tests start replicas through it.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(reconciler::exec::local::supervisor::main(
        std::env::args_os().skip(1),
    ))
}
