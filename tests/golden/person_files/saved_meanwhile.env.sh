export A=1
export B=2
export C=3
