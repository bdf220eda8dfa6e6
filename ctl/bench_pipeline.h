/*
 * bench_pipeline.h - loaderctl bench pipeline (bench_pipeline.c).
 */
#ifndef LD_BENCH_PIPELINE_H
#define LD_BENCH_PIPELINE_H

/* The command: argv[0] is "pipeline"; returns a CTL_* exit status. */
int ctl_bench_pipeline(int argc, char **argv);

#endif /* LD_BENCH_PIPELINE_H */
