//! Hostile PTX: seeded token mutations of real kernels must load or fail with an error, never
//! panic (a panic here would be an abort or a poisoned device through `Gpu::load_ptx`), and
//! the ones that load run under the checks without panicking either.

use crate::emulator::{Emulator, EmulatorConfig, KernelLaunch, StreamId};

/// Kernels with most of what the parser and decoder handle: parameters, registers, shared and
/// local arrays, predicates, vectors, addresses with offsets, labels, immediates.
const SOURCES: &[&str] = &[
    r#".version 8.0
.target sm_80
.address_size 64
.global .align 4 .u32 table[4] = {1, 2, 3, 4};
.visible .entry k(.param .u64 y, .param .u32 n, .param .align 8 .b8 blob[8]) .maxntid 256, 1, 1
{
    .reg .pred %p<3>;
    .reg .b32 %r<9>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<6>;
    .shared .align 16 .b8 tile[1024];
    .local .align 4 .b8 scratch[64];
    ld.param.u64 %rd1, [y];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mad.lo.s32 %r4, %r3, 256, %r2;
    setp.ge.u32 %p1, %r4, %r1;
    @%p1 bra $L__done;
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.v2.f32 {%f1, %f2}, [%rd3+-8];
    fma.rn.f32 %f3, %f1, 0f3F800000, %f2;
    st.shared.f32 [tile+16], %f3;
    bar.sync 0;
    ld.shared.f32 %f4, [tile+16];
    st.local.f32 [scratch], %f4;
    shfl.sync.bfly.b32 %r5|%p2, %r4, 1, 31, -1;
    st.global.f32 [%rd3], %f4;
$L__done:
    ret;
}
"#,
    r#".version 8.0
.target sm_80
.address_size 64
.extern .shared .align 16 .b8 dyn[];
.visible .entry m(.param .u64 p) .reqntid 32
{
    .reg .b32 %r<12>;
    .reg .b64 %rd<3>;
    .reg .f32 %f<9>;
    ld.param.u64 %rd1, [p];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, dyn;
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r2, %r3, %r4, %r5}, [%r1];
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r2, %r3, %r4, %r5}, {%r6, %r7}, {%f5, %f6, %f7, %f8};
    atom.global.add.u32 %r8, [%rd2], 1;
    { .reg .b32 %t; mov.b32 %t, 7; }
    ret;
}
"#,
];

/// Tokens spliced in: structure, huge and negative numbers, directives, odd names.
const SPLICE: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    ",",
    ";",
    "-",
    "+",
    "|",
    "!",
    "@",
    "<",
    ">",
    "=",
    ":",
    "0",
    "1",
    "-1",
    "4294967296",
    "18446744073709551615",
    "99999999999999999999999",
    "0x7fffffffffffffff",
    "0f7F800000",
    "1e308",
    ".v4",
    ".v2",
    ".shared",
    ".global",
    ".local",
    ".param",
    ".reg",
    ".align",
    ".b8",
    ".u64",
    ".pred",
    ".entry",
    ".func",
    ".reqntid",
    ".maxntid",
    "%r1",
    "%rd1",
    "%p1",
    "%tid.x",
    "$L__done",
    "tile",
    "_",
    "bra",
    "ret",
    "ld.global.v4.f32",
    "st.shared.b128",
    "mov.u32",
    "bar.sync",
    "\"",
    "/*",
    "//",
];

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn mutated_ptx_loads_or_fails_but_never_panics() {
    let e = Emulator::new(EmulatorConfig {
        threads: 1,
        memory_capacity: 16 << 20,
        // Mutated branches can loop forever: the watchdog ends them quickly.
        max_thread_instructions: 20_000,
        ..EmulatorConfig::default()
    });
    for src in SOURCES {
        let m = e.load_ptx(src).unwrap_or_else(|err| panic!("{}", err.log));
        e.unload(m).expect("unload");
    }
    let buf = e.alloc(1 << 16).expect("alloc");
    let mut rng = 0x1234_5678u64;
    let (mut loaded, mut ran) = (0, 0);
    for round in 0..4000 {
        let src = SOURCES[round % SOURCES.len()];
        // Even rounds mutate words, odd rounds the finer tokens between punctuation.
        let mut toks: Vec<&str> = if round % 2 == 0 {
            src.split(' ').collect()
        } else {
            src.split_inclusive(|c: char| ",;{}[]()+-|@<>=: \n".contains(c))
                .collect()
        };
        for _ in 0..1 + splitmix(&mut rng) % 4 {
            let i = (splitmix(&mut rng) % toks.len() as u64) as usize;
            let t = SPLICE[(splitmix(&mut rng) % SPLICE.len() as u64) as usize];
            match splitmix(&mut rng) % 3 {
                0 => toks[i] = t,
                1 => toks.insert(i, t),
                _ => {
                    toks.remove(i);
                }
            }
        }
        let text = toks.join(if round % 2 == 0 { " " } else { "" });
        if let Ok(m) = e.load_ptx(&text) {
            loaded += 1;
            for name in ["k", "m"] {
                if let Ok(f) = e.function(m, name) {
                    let _ = e.function_info(f);
                    // Run what decodes: the checks must catch whatever the mutation does.
                    let args: [&[u8]; 3] = [
                        &buf.to_le_bytes(),
                        &64u32.to_le_bytes(),
                        &0u64.to_le_bytes(),
                    ];
                    for n in 1..=3 {
                        let req = KernelLaunch {
                            function: f,
                            grid: [2, 1, 1],
                            block: [32, 1, 1],
                            shared_mem_bytes: 256,
                            stream: StreamId::DEFAULT,
                            args: &args[..n],
                        };
                        if e.launch(&req).is_ok() {
                            ran += 1;
                            let _ = e.synchronize_stream(StreamId::DEFAULT);
                        }
                    }
                }
            }
            e.unload(m).expect("unload");
        }
    }
    // Some mutations are harmless and some launches run; the point is that none panicked.
    assert!(
        loaded < 4000,
        "every mutation loaded: the mutator does nothing"
    );
    assert!(ran > 0, "no mutation ran: the launches test nothing");
}
