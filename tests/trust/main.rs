//! Trust in what is applied (issue 15, items 5 and 7), one test binary:
//! saved plans applied exactly as reviewed, signed commits, and secret
//! environment values that no output or state holds.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests

mod cli_support;
mod saved_plans;
mod sensitive_env;
mod signed_commits;
