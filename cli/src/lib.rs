//! The `spillway` command line's library half: `detect`, which the benches' and the tests'
//! tools share with `spillway detect`.

pub mod detect;
