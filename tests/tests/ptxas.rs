//! Every kernel variant (the runtime crate's registry, the example kernels, the intrinsic
//! kernels and the `wgmma` kernels of `pagesift_tests`) assembled by NVIDIA's `ptxas` for its own target and for sm_90,
//! with the register report checked: no errors, no spills.
//!
//! `ptxas` is found at `PAGESIFT_PTXAS`, else `target/ptxas/ptxas` in the workspace, else on
//! `PATH`. Without it the test prints why it skipped, and fails when `PAGESIFT_REQUIRE_PTXAS=1`.

use pagesift_gpu::KernelVariant;
use pagesift_tests::{example_kernels, intrinsic_kernels, wgmma_kernels};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PAGESIFT_PTXAS") {
        return Some(PathBuf::from(p));
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ptxas/ptxas");
    if local.is_file() {
        return Some(local);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("ptxas"))
        .find(|p| p.is_file())
}

fn example_variants() -> Vec<&'static KernelVariant> {
    let mut v = example_kernels::all_variants();
    v.extend(intrinsic_kernels::all_variants());
    v.extend(wgmma_kernels::all_variants());
    v
}

/// The architectures a variant is assembled for: its own target, and sm_90 where its PTX can
/// run there (an `sm_90a` module only assembles for sm_90a).
fn archs(v: &KernelVariant) -> Vec<String> {
    let mut a = vec![v.target.to_string()];
    if !v.target.ends_with('a') && v.target != "sm_90" {
        a.push("sm_90".to_string());
    }
    a
}

/// Spill bytes (stores, loads) of every function in a `ptxas -v` report.
fn spills(report: &str) -> Vec<(u64, u64)> {
    let number_before = |line: &str, what: &str| -> Option<u64> {
        let end = line.find(what)?;
        line[..end]
            .trim_end()
            .rsplit([' ', ','])
            .next()?
            .parse()
            .ok()
    };
    report
        .lines()
        .filter(|l| l.contains("spill stores"))
        .map(|l| {
            (
                number_before(l, "bytes spill stores").unwrap_or(u64::MAX),
                number_before(l, "bytes spill loads").unwrap_or(u64::MAX),
            )
        })
        .collect()
}

struct Job {
    name: String,
    arch: String,
    ptx: &'static str,
}

fn assemble(ptxas: &Path, dir: &Path, job: &Job) -> Result<(), String> {
    let stem = format!(
        "{}-{}",
        job.name.replace(['[', ']', ',', '='], "_"),
        job.arch
    );
    let src = dir.join(format!("{stem}.ptx"));
    std::fs::write(&src, job.ptx).map_err(|e| format!("writing {}: {e}", src.display()))?;
    let out = Command::new(ptxas)
        .arg(format!("-arch={}", job.arch))
        .arg("--warn-on-spills")
        .arg("-v")
        .arg(&src)
        .arg("-o")
        .arg(dir.join(format!("{stem}.cubin")))
        .output()
        .map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() || report.contains("error") {
        return Err(format!(
            "{} for {}: ptxas failed ({}):\n{report}\nPTX kept at {}",
            job.name,
            job.arch,
            out.status,
            src.display()
        ));
    }
    let s = spills(&report);
    if s.is_empty() {
        return Err(format!(
            "{} for {}: no register report in ptxas -v output:\n{report}",
            job.name, job.arch
        ));
    }
    if report.contains("bytes spill") && s.iter().any(|&(st, ld)| st != 0 || ld != 0) {
        return Err(format!(
            "{} for {}: spills {s:?}:\n{report}",
            job.name, job.arch
        ));
    }
    Ok(())
}

#[test]
fn every_variant_assembles_without_spills() {
    let Some(ptxas) = find_ptxas() else {
        if std::env::var("PAGESIFT_REQUIRE_PTXAS").is_ok_and(|v| v == "1") {
            panic!("ptxas is required (PAGESIFT_REQUIRE_PTXAS=1) but was not found (PAGESIFT_PTXAS, target/ptxas/ptxas, PATH)");
        }
        eprintln!("SKIPPED every_variant_assembles_without_spills: no ptxas (set PAGESIFT_PTXAS or install it to target/ptxas/ptxas)");
        return;
    };
    let mut variants = pagesift_gpu::kernels::registry();
    let n_registry = variants.len();
    variants.extend(example_variants());
    let mut entries: Vec<&str> = variants.iter().map(|v| v.entry).collect();
    entries.sort_unstable();
    let before = entries.len();
    entries.dedup();
    assert_eq!(before, entries.len(), "PTX entry names are not unique");

    let jobs: Vec<Job> = variants
        .iter()
        .flat_map(|v| {
            archs(v).into_iter().map(move |arch| Job {
                name: v.display_name(),
                arch,
                ptx: v.ptx,
            })
        })
        .collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tmp/ptxas-test");
    std::fs::create_dir_all(&dir).expect("creating the scratch directory");
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(8);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                if let Err(e) = assemble(&ptxas, &dir, job) {
                    failures.lock().unwrap_or_else(|p| p.into_inner()).push(e);
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    pagesift_tests::report(&format!(
        "ptxas ({}) assembled {} variants ({} from the registry, {} examples) in {} jobs, {} failed",
        ptxas.display(),
        variants.len(),
        n_registry,
        variants.len() - n_registry,
        jobs.len(),
        failures.len()
    ));
    assert!(
        failures.is_empty(),
        "{} of {} ptxas jobs failed:\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n\n")
    );
}

#[test]
fn spill_report_parsing() {
    let ok = "ptxas info    : Used 10 registers\nptxas info    : 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads";
    assert_eq!(spills(ok), vec![(0, 0)]);
    let bad = "ptxas info    : 16 bytes stack frame, 24 bytes spill stores, 8 bytes spill loads";
    assert_eq!(spills(bad), vec![(24, 8)]);
}

#[test]
fn variant_metadata_matches_the_ptx() {
    for v in pagesift_gpu::kernels::registry()
        .into_iter()
        .chain(example_variants())
    {
        assert!(
            v.ptx.contains(&format!(".visible .entry {}(", v.entry)),
            "{}",
            v.display_name()
        );
        assert!(
            v.ptx.contains(&format!(".target {}\n", v.target)),
            "{}",
            v.display_name()
        );
        let (maj, min) = v.ptx_version;
        assert!(
            v.ptx.contains(&format!(".version {maj}.{min}\n")),
            "{}",
            v.display_name()
        );
        let [x, y, z] = v.block;
        assert!(
            v.ptx.contains(&format!(".reqntid {x}, {y}, {z}")),
            "{}",
            v.display_name()
        );
        assert_eq!(v.ptx.matches(".entry").count(), 1, "{}", v.display_name());
        // The fault record, then two per slice (optional or not) and one per scalar or
        // parameter struct.
        let slices = v
            .params
            .iter()
            .filter(|(_, t)| t.starts_with('&') || t.starts_with("Option<&"))
            .count();
        assert_eq!(
            v.ptx_params as usize,
            1 + v.params.len() + slices,
            "{}",
            v.display_name()
        );
        assert_eq!(
            v.ptx.matches("\t.param .").count(),
            v.ptx_params as usize,
            "{}",
            v.display_name()
        );
    }
}
