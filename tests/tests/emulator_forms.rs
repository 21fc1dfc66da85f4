//! Every instruction form the `ptx_kernel!` emitter can produce has an emulator rule.
//!
//! `FORMS` is the emitter's form list (`instruction_forms()` of `pagesift-ptx-macros`) as of
//! this writing; when the runtime exports it as `pagesift_gpu::__private::__instruction_forms!()`,
//! the test should take the list from there instead of this copy.

use pagesift_gpu::driver::emulator::check_instruction_form;

const FORMS: &str = "
    abs.bf16 abs.bf16x2 abs.f16 abs.f16x2 abs.f32 abs.f64 abs.s16 abs.s32 abs.s64 add.f32 add.f64
    add.rn.bf16 add.rn.bf16x2 add.rn.f16 add.rn.f16x2 add.s16 add.s32 add.s64 add.u16 add.u32
    add.u64 and.b16 and.b32 and.b64 and.pred atom.global.add.f32 atom.global.add.f64
    atom.global.add.s32 atom.global.add.u32 atom.global.add.u64 atom.global.and.b32
    atom.global.and.b64 atom.global.cas.b32 atom.global.cas.b64 atom.global.exch.b32
    atom.global.exch.b64 atom.global.max.s32 atom.global.max.s64 atom.global.max.u32
    atom.global.max.u64 atom.global.min.s32 atom.global.min.s64 atom.global.min.u32
    atom.global.min.u64 atom.global.or.b32 atom.global.or.b64 atom.global.xor.b32
    atom.global.xor.b64 atom.shared.add.f32 atom.shared.add.f64 atom.shared.add.s32
    atom.shared.add.u32 atom.shared.add.u64 atom.shared.and.b32 atom.shared.and.b64
    atom.shared.cas.b32 atom.shared.cas.b64 atom.shared.exch.b32 atom.shared.exch.b64
    atom.shared.max.s32 atom.shared.max.s64 atom.shared.max.u32 atom.shared.max.u64
    atom.shared.min.s32 atom.shared.min.s64 atom.shared.min.u32 atom.shared.min.u64
    atom.shared.or.b32 atom.shared.or.b64 atom.shared.xor.b32 atom.shared.xor.b64 bar.sync bfe.s32
    bfe.u32 bfi.b32 bra clz.b32 clz.b64 copysign.f32 copysign.f64 cos.approx.f32 cvt.f32.bf16
    cvt.f32.f16 cvt.f64.bf16 cvt.f64.f16 cvt.f64.f32 cvt.rmi.f32.f32 cvt.rmi.f64.f64 cvt.rn.bf16.f16
    cvt.rn.bf16.f32 cvt.rn.bf16.f64 cvt.rn.bf16.s16 cvt.rn.bf16.s32 cvt.rn.bf16.s64 cvt.rn.bf16.s8
    cvt.rn.bf16.u16 cvt.rn.bf16.u32 cvt.rn.bf16.u64 cvt.rn.bf16.u8 cvt.rn.f16.bf16 cvt.rn.f16.f32
    cvt.rn.f16.f64 cvt.rn.f16.s16 cvt.rn.f16.s32 cvt.rn.f16.s64 cvt.rn.f16.s8 cvt.rn.f16.u16
    cvt.rn.f16.u32 cvt.rn.f16.u64 cvt.rn.f16.u8 cvt.rn.f32.f64 cvt.rn.f32.s16 cvt.rn.f32.s32
    cvt.rn.f32.s64 cvt.rn.f32.s8 cvt.rn.f32.u16 cvt.rn.f32.u32 cvt.rn.f32.u64 cvt.rn.f32.u8
    cvt.rn.f64.s16 cvt.rn.f64.s32 cvt.rn.f64.s64 cvt.rn.f64.s8 cvt.rn.f64.u16 cvt.rn.f64.u32
    cvt.rn.f64.u64 cvt.rn.f64.u8 cvt.rni.f32.f32 cvt.rni.f64.f64 cvt.rpi.f32.f32 cvt.rpi.f64.f64
    cvt.rzi.f32.f32 cvt.rzi.f64.f64 cvt.rzi.s16.bf16 cvt.rzi.s16.f16 cvt.rzi.s16.f32 cvt.rzi.s16.f64
    cvt.rzi.s32.bf16 cvt.rzi.s32.f16 cvt.rzi.s32.f32 cvt.rzi.s32.f64 cvt.rzi.s64.bf16
    cvt.rzi.s64.f16 cvt.rzi.s64.f32 cvt.rzi.s64.f64 cvt.rzi.s8.bf16 cvt.rzi.s8.f16 cvt.rzi.s8.f32
    cvt.rzi.s8.f64 cvt.rzi.u16.bf16 cvt.rzi.u16.f16 cvt.rzi.u16.f32 cvt.rzi.u16.f64 cvt.rzi.u32.bf16
    cvt.rzi.u32.f16 cvt.rzi.u32.f32 cvt.rzi.u32.f64 cvt.rzi.u64.bf16 cvt.rzi.u64.f16 cvt.rzi.u64.f32
    cvt.rzi.u64.f64 cvt.rzi.u8.bf16 cvt.rzi.u8.f16 cvt.rzi.u8.f32 cvt.rzi.u8.f64 cvt.s16.s32
    cvt.s16.s64 cvt.s16.s8 cvt.s16.u16 cvt.s16.u32 cvt.s16.u64 cvt.s16.u8 cvt.s32.s16 cvt.s32.s64
    cvt.s32.s8 cvt.s32.u16 cvt.s32.u32 cvt.s32.u64 cvt.s32.u8 cvt.s64.s16 cvt.s64.s32 cvt.s64.s8
    cvt.s64.u16 cvt.s64.u32 cvt.s64.u64 cvt.s64.u8 cvt.s8.s16 cvt.s8.s32 cvt.s8.s64 cvt.s8.u16
    cvt.s8.u32 cvt.s8.u64 cvt.s8.u8 cvt.u16.s16 cvt.u16.s32 cvt.u16.s64 cvt.u16.s8 cvt.u16.u32
    cvt.u16.u64 cvt.u16.u8 cvt.u32.s16 cvt.u32.s32 cvt.u32.s64 cvt.u32.s8 cvt.u32.u16 cvt.u32.u64
    cvt.u32.u8 cvt.u64.s16 cvt.u64.s32 cvt.u64.s64 cvt.u64.s8 cvt.u64.u16 cvt.u64.u32 cvt.u64.u8
    cvt.u8.s16 cvt.u8.s32 cvt.u8.s64 cvt.u8.s8 cvt.u8.u16 cvt.u8.u32 cvt.u8.u64 cvta.to.global.u64
    div.rn.f32 div.rn.f64 div.s16 div.s32 div.s64 div.u16 div.u32 div.u64 ex2.approx.f32 fma.rn.bf16
    fma.rn.bf16x2 fma.rn.f16 fma.rn.f16x2 fma.rn.f32 fma.rn.f64 ld.global.f32 ld.global.f64
    ld.global.nc.f32 ld.global.nc.f64 ld.global.nc.s16 ld.global.nc.s32 ld.global.nc.s64
    ld.global.nc.s8 ld.global.nc.u16 ld.global.nc.u32 ld.global.nc.u64 ld.global.nc.u8
    ld.global.nc.v2.f32 ld.global.nc.v2.f64 ld.global.nc.v2.s16 ld.global.nc.v2.s32
    ld.global.nc.v2.s64 ld.global.nc.v2.s8 ld.global.nc.v2.u16 ld.global.nc.v2.u32
    ld.global.nc.v2.u64 ld.global.nc.v2.u8 ld.global.nc.v4.f32 ld.global.nc.v4.f64
    ld.global.nc.v4.s16 ld.global.nc.v4.s32 ld.global.nc.v4.s64 ld.global.nc.v4.s8
    ld.global.nc.v4.u16 ld.global.nc.v4.u32 ld.global.nc.v4.u64 ld.global.nc.v4.u8 ld.global.s16
    ld.global.s32 ld.global.s64 ld.global.s8 ld.global.u16 ld.global.u32 ld.global.u64 ld.global.u8
    ld.global.v2.f32 ld.global.v2.f64 ld.global.v2.s16 ld.global.v2.s32 ld.global.v2.s64
    ld.global.v2.s8 ld.global.v2.u16 ld.global.v2.u32 ld.global.v2.u64 ld.global.v2.u8
    ld.global.v4.f32 ld.global.v4.f64 ld.global.v4.s16 ld.global.v4.s32 ld.global.v4.s64
    ld.global.v4.s8 ld.global.v4.u16 ld.global.v4.u32 ld.global.v4.u64 ld.global.v4.u8 ld.param.f32
    ld.param.f64 ld.param.s16 ld.param.s32 ld.param.s64 ld.param.s8 ld.param.u16 ld.param.u32
    ld.param.u64 ld.param.u8 ld.param.v2.f32 ld.param.v2.f64 ld.param.v2.s16 ld.param.v2.s32
    ld.param.v2.s64 ld.param.v2.s8 ld.param.v2.u16 ld.param.v2.u32 ld.param.v2.u64 ld.param.v2.u8
    ld.param.v4.f32 ld.param.v4.f64 ld.param.v4.s16 ld.param.v4.s32 ld.param.v4.s64 ld.param.v4.s8
    ld.param.v4.u16 ld.param.v4.u32 ld.param.v4.u64 ld.param.v4.u8 ld.shared.f32 ld.shared.f64
    ld.shared.s16 ld.shared.s32 ld.shared.s64 ld.shared.s8 ld.shared.u16 ld.shared.u32 ld.shared.u64
    ld.shared.u8 ld.shared.v2.f32 ld.shared.v2.f64 ld.shared.v2.s16 ld.shared.v2.s32
    ld.shared.v2.s64 ld.shared.v2.s8 ld.shared.v2.u16 ld.shared.v2.u32 ld.shared.v2.u64
    ld.shared.v2.u8 ld.shared.v4.f32 ld.shared.v4.f64 ld.shared.v4.s16 ld.shared.v4.s32
    ld.shared.v4.s64 ld.shared.v4.s8 ld.shared.v4.u16 ld.shared.v4.u32 ld.shared.v4.u64
    ld.shared.v4.u8 lg2.approx.f32 mad.lo.s16 mad.lo.s32 mad.lo.s64 mad.lo.u16 mad.lo.u32 mad.lo.u64
    max.bf16 max.bf16x2 max.f16 max.f16x2 max.f32 max.f64 max.s32 max.s64 max.u32 max.u64 min.bf16
    min.bf16x2 min.f16 min.f16x2 min.f32 min.f64 min.s32 min.s64 min.u32 min.u64 mov.b16 mov.b32
    mov.b64 mov.f32 mov.f64 mov.pred mov.s16 mov.s32 mov.s64 mov.u16 mov.u32 mov.u64 mul.f32 mul.f64
    mul.hi.s16 mul.hi.s32 mul.hi.s64 mul.hi.u16 mul.hi.u32 mul.hi.u64 mul.lo.s16 mul.lo.s32
    mul.lo.s64 mul.lo.u16 mul.lo.u32 mul.lo.u64 mul.rn.bf16 mul.rn.bf16x2 mul.rn.f16 mul.rn.f16x2
    mul.wide.s32 mul.wide.u32 neg.bf16 neg.bf16x2 neg.f16 neg.f16x2 neg.f32 neg.f64 neg.s16 neg.s32
    neg.s64 not.b16 not.b32 not.b64 not.pred or.b16 or.b32 or.b64 or.pred popc.b32 popc.b64
    rcp.approx.f32 rcp.rn.f32 rcp.rn.f64 rem.s16 rem.s32 rem.s64 rem.u16 rem.u32 rem.u64 ret
    rsqrt.approx.f32 selp.b16 selp.b32 selp.b64 selp.b8 selp.f32 selp.f64 setp.eq.bf16 setp.eq.f16
    setp.eq.f32 setp.eq.f64 setp.eq.s16 setp.eq.s32 setp.eq.s64 setp.eq.u16 setp.eq.u32 setp.eq.u64
    setp.ge.bf16 setp.ge.f16 setp.ge.f32 setp.ge.f64 setp.ge.s16 setp.ge.s32 setp.ge.s64 setp.ge.u16
    setp.ge.u32 setp.ge.u64 setp.gt.bf16 setp.gt.f16 setp.gt.f32 setp.gt.f64 setp.gt.s16 setp.gt.s32
    setp.gt.s64 setp.gt.u16 setp.gt.u32 setp.gt.u64 setp.le.bf16 setp.le.f16 setp.le.f32 setp.le.f64
    setp.le.s16 setp.le.s32 setp.le.s64 setp.le.u16 setp.le.u32 setp.le.u64 setp.lt.bf16 setp.lt.f16
    setp.lt.f32 setp.lt.f64 setp.lt.s16 setp.lt.s32 setp.lt.s64 setp.lt.u16 setp.lt.u32 setp.lt.u64
    setp.ne.s16 setp.ne.s32 setp.ne.s64 setp.ne.u16 setp.ne.u32 setp.ne.u64 setp.neu.bf16
    setp.neu.f16 setp.neu.f32 setp.neu.f64 shfl.sync.bfly.b32 shfl.sync.down.b32 shfl.sync.idx.b32
    shfl.sync.up.b32 shl.b16 shl.b32 shl.b64 shr.s16 shr.s32 shr.s64 shr.u16 shr.u32 shr.u64
    sin.approx.f32 sqrt.approx.f32 sqrt.rn.f32 sqrt.rn.f64 st.global.f32 st.global.f64 st.global.s16
    st.global.s32 st.global.s64 st.global.s8 st.global.u16 st.global.u32 st.global.u64 st.global.u8
    st.global.v2.f32 st.global.v2.f64 st.global.v2.s16 st.global.v2.s32 st.global.v2.s64
    st.global.v2.s8 st.global.v2.u16 st.global.v2.u32 st.global.v2.u64 st.global.v2.u8
    st.global.v4.f32 st.global.v4.f64 st.global.v4.s16 st.global.v4.s32 st.global.v4.s64
    st.global.v4.s8 st.global.v4.u16 st.global.v4.u32 st.global.v4.u64 st.global.v4.u8 st.shared.f32
    st.shared.f64 st.shared.s16 st.shared.s32 st.shared.s64 st.shared.s8 st.shared.u16 st.shared.u32
    st.shared.u64 st.shared.u8 st.shared.v2.f32 st.shared.v2.f64 st.shared.v2.s16 st.shared.v2.s32
    st.shared.v2.s64 st.shared.v2.s8 st.shared.v2.u16 st.shared.v2.u32 st.shared.v2.u64
    st.shared.v2.u8 st.shared.v4.f32 st.shared.v4.f64 st.shared.v4.s16 st.shared.v4.s32
    st.shared.v4.s64 st.shared.v4.s8 st.shared.v4.u16 st.shared.v4.u32 st.shared.v4.u64
    st.shared.v4.u8 sub.f32 sub.f64 sub.rn.bf16 sub.rn.bf16x2 sub.rn.f16 sub.rn.f16x2 sub.s16
    sub.s32 sub.s64 sub.u16 sub.u32 sub.u64 tanh.approx.f32 testp.notanumber.f32
    testp.notanumber.f64 vote.sync.all.pred vote.sync.any.pred vote.sync.ballot.b32 xor.b16 xor.b32
    xor.b64 xor.pred
";

#[test]
fn every_emitter_form_has_an_emulator_rule() {
    let forms: Vec<&str> = FORMS.split_whitespace().collect();
    assert!(
        forms.len() > 500,
        "the form list is incomplete: {}",
        forms.len()
    );
    let missing: Vec<String> = forms
        .iter()
        .filter_map(|f| check_instruction_form(f).err().map(|e| format!("{f}: {e}")))
        .collect();
    println!(
        "{} of {} emitter forms have an emulator rule",
        forms.len() - missing.len(),
        forms.len()
    );
    assert!(
        missing.is_empty(),
        "forms without an emulator rule:\n{}",
        missing.join("\n")
    );
}

#[test]
fn forms_the_emulator_lacks_are_refused() {
    for f in [
        "mul24.lo.u32",
        "atom.global.max.f32",
        "ld.global.v8.f32",
        "add.rn.bogus.f32",
    ] {
        assert!(check_instruction_form(f).is_err(), "{f} must have no rule");
    }
}
