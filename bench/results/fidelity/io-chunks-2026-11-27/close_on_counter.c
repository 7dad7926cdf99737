#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <fcntl.h>
#include <unistd.h>
#include <sched.h>
#include <time.h>
static unsigned long long nowns(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000ull+t.tv_nsec;}
static char buf[65536]; static int fd; static int CPU=1;
static void rd(unsigned long long v[8]){ssize_t n=pread(fd,buf,sizeof buf-1,0);buf[n]=0;char key[24];int kl=snprintf(key,sizeof key,"\ncpu%d ",CPU);char*p=strstr(buf,key);sscanf(p+kl,"%llu %llu %llu %llu %llu %llu %llu %llu",&v[0],&v[1],&v[2],&v[3],&v[4],&v[5],&v[6],&v[7]);}
static unsigned long long B(unsigned long long*v){return v[0]+v[1]+v[2]+v[5]+v[6];}
static unsigned long long T(unsigned long long*v){return B(v)+v[3]+v[4]+v[7];}
static unsigned long long U(unsigned long long*v){return v[0]+v[1];}
static void spin_until(unsigned long long t){while(nowns()<t);}
static void sleep_until(unsigned long long t){struct timespec ts={t/1000000000ull,t%1000000000ull};clock_nanosleep(CLOCK_MONOTONIC,TIMER_ABSTIME,&ts,NULL);}
int main(int argc,char**argv){int mode=atoi(argv[1]); double target=atof(argv[2]); int W=atoi(argv[3]);
cpu_set_t s;CPU_ZERO(&s);CPU_SET(CPU,&s);sched_setaffinity(0,sizeof s,&s);fd=open("/proc/stat",O_RDONLY);
srand(42); unsigned long long t0=(nowns()/1000000000ull+1)*1000000000ull; double tick=1e7; double sa=0; int n=0; int hist[9]={0};
for(int i=0;i<W;i++){unsigned long long ws=t0+i*1000000000ull, we=ws+1000000000ull; sleep_until(ws);
 unsigned long long a[8]; rd(a);
 /* "IO": bursts of 1-3 ms spin then 1-3 ms sleep, for 150-300 ms */
 unsigned long long ioend=ws+150000000ull+(rand()%150)*1000000ull;
 while(nowns()<ioend){spin_until(nowns()+1000000ull+(rand()%2000)*1000ull); struct timespec ts={0,1000000+(rand()%2000)*1000}; nanosleep(&ts,0);}
 unsigned long long v[8]; rd(v); unsigned long long t=nowns();
 double span=(T(v)-T(a))*tick+(we-t); double want=target*span-(B(v)-B(a))*tick; if(want<0)want=0;
 unsigned long long end=t+(unsigned long long)want; if(end>we)end=we;
 if(mode==0){spin_until(end);} else {
  spin_until(end-20000000ull); unsigned long long last=~0ull, stop=end;
  for(;;){rd(v); t=nowns();
   if(last!=~0ull && U(v)!=last){double span=(T(v)-T(a))*tick+(we-t);
     double other=(double)((B(v)-U(v))-(B(a)-U(a)))*tick;
     double c=(U(v)-U(a))*tick+2e6; double aim;
     if(mode==1){ double units=floor(target*span/tick+0.5); aim=(units+0.5)*tick-other; }
     else { aim=target*span-other+(mode==2?5e6:0)+ (mode==3? 5e6:0); /* true busy: c - p_s where p_s~5ms */ if(mode==3){ aim+= (other>0?5e6:0);} }
     stop=t+(aim>c?(unsigned long long)(aim-c):0);}
   last=U(v); if(t>=stop)break; unsigned long long d=t+500000; spin_until(d<stop?d:stop);}
 }
 sleep_until(we); unsigned long long b[8]; rd(b);
 double u=(double)(B(b)-B(a))/(double)(T(b)-T(a)); sa+=fabs(u-target); n++; int q=(int)lround((u-target)*100); if(q<-4)q=-4; if(q>4)q=4; hist[q+4]++;
 if(getenv("V")) printf("%llu/%llu ",B(b)-B(a),T(b)-T(a));
}
printf("mode %d target %.3f: mean|e| %.4f ",mode,target,sa/n); for(int q=0;q<9;q++) printf("%+d:%d ",q-4,hist[q]); printf("\n");}
