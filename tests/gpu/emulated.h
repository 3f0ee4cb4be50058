/* emulated.h - the inputs of the GPU tests on the emulated GPU.
 *
 * The programs of tests/gpu run on a GPU (label gpu) and, built against the library's CUDA backend
 * for the emulated runtime of tests/emu, on the CPU (labels emu and emu_race), where every GPU
 * thread is a fiber and a step costs what its threads do on one core.  There a case takes the
 * smallest input that still takes each of its code paths (the threshold that decides a path is
 * named where its input is chosen), and runs each kind of input once; on a GPU the inputs stay
 * the sizes the case was written for, which also time the real device. */
#ifndef NNPOPS_TEST_EMULATED_H
#define NNPOPS_TEST_EMULATED_H

#ifdef NNPOPS_CUDA_EMULATION
#define TEST_EMULATED 1
#else
#define TEST_EMULATED 0
#endif

/* GPU_OR_EMU(a, b): a on a GPU, b on the emulated GPU */
#define GPU_OR_EMU(gpu, emu) (TEST_EMULATED ? (emu) : (gpu))

#endif
