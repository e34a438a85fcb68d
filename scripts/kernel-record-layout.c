/* Prints the offsets of the CUPTI kernel-record fields the probe reads, to
 * check crates/probe/src/activity.rs against the installed CUPTI headers.
 * Build: gcc -I$CUDA/include -I$CUDA/extras/CUPTI/include kernel-record-layout.c */
#include <stddef.h>
#include <stdio.h>
#include <cupti.h>
int main(void) {
  printf("start %zu localMemoryTotal %zu name %zu localMemoryTotal_v2 %zu sizeof %zu\n",
         offsetof(CUpti_ActivityKernel10, start), offsetof(CUpti_ActivityKernel10, localMemoryTotal),
         offsetof(CUpti_ActivityKernel10, name), offsetof(CUpti_ActivityKernel10, localMemoryTotal_v2),
         sizeof(CUpti_ActivityKernel10));
  printf("CUPTI_API_VERSION %d\n", CUPTI_API_VERSION);
  return 0;
}
